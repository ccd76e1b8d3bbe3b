/* Low-level JSON scanning; see json_scan.h. */
#include "json_scan.h"

#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

const uint8_t tb_ws_table[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

/* Bytes that stop the fast string scan: quote, backslash, control chars, non-ASCII. */
static const uint8_t str_special[256] = {
    [0 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x80 ... 0xff] = 1,
};

_Noreturn void tb_fail_kind(tb_scanner *s, tb_err_kind kind, const uint8_t *at, const char *msg)
{
    if (at > s->end)
        at = s->end;
    s->err_kind = kind;
    s->err_msg = msg;
    s->err_off = at ? (size_t)(at - s->base) : 0;
    longjmp(s->jb, 1);
}

_Noreturn void tb_fail(tb_scanner *s, const uint8_t *at, const char *msg)
{
    /* Running off the end is the usual symptom of a truncated file: say so. */
    if (at >= s->end)
        msg = "unexpected end of data (truncated trace?)";
    tb_fail_kind(s, TB_ERR_FORMAT, at, msg);
}

void *tb_grow(tb_scanner *s, void *ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return ptr;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 4)
            tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
        ncap = ncap < (1u << 20) ? ncap * 2 : ncap + ncap / 2;
    }
    if (ncap > SIZE_MAX / elem)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    void *np = realloc(ptr, ncap * elem);
    if (!np)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    *cap = ncap;
    return np;
}

void tb_scanner_free(tb_scanner *s)
{
    free(s->scratch);
    free(s->kscratch);
    s->scratch = s->kscratch = NULL;
    s->scratch_cap = s->kscratch_cap = 0;
}

/* First byte in [p, end) that needs attention inside a string, or end. */
static inline const uint8_t *find_special(const uint8_t *p, const uint8_t *end)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches them */
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmplt_epi8(v, space));
        unsigned mask = (unsigned)_mm_movemask_epi8(m);
        if (mask)
            return p + __builtin_ctz(mask);
        p += 16;
    }
#endif
    while (p < end && !str_special[*p])
        p++;
    return p;
}

/* p at a byte >= 0x80: validates one UTF-8 sequence exactly as Python's strict decoder
 * (no overlongs, no surrogates, nothing above U+10FFFF); returns the byte after it. */
static const uint8_t *check_utf8(tb_scanner *s, const uint8_t *p)
{
    uint8_t c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        tb_fail(s, p, "invalid UTF-8");
    }
    if ((size_t)(s->end - p) <= n)
        tb_fail(s, s->end, "invalid UTF-8");
    if (p[1] < lo || p[1] > hi)
        tb_fail(s, p, "invalid UTF-8");
    for (size_t i = 2; i <= n; i++)
        if ((p[i] & 0xC0) != 0x80)
            tb_fail(s, p, "invalid UTF-8");
    return p + n + 1;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The 4 hex digits at p (p[0..3]) or -1. */
static long hex4(tb_scanner *s, const uint8_t *p)
{
    if (s->end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(uint8_t *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* p at a backslash. Resolves one escape; appends its UTF-8 to o (when o != NULL, which
 * must have room for 4 bytes) and stores its length in *olen. Returns the byte after. */
static const uint8_t *escape(tb_scanner *s, const uint8_t *p, uint8_t *o, size_t *olen)
{
    if (s->end - p < 2)
        tb_fail(s, s->end, "truncated escape");
    uint8_t c;
    switch (p[1]) {
    case '"': c = '"'; break;
    case '\\': c = '\\'; break;
    case '/': c = '/'; break;
    case 'b': c = '\b'; break;
    case 'f': c = '\f'; break;
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'u': {
        long cp = hex4(s, p + 2);
        if (cp < 0)
            tb_fail(s, p, "invalid \\u escape");
        const uint8_t *next = p + 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            /* a high surrogate pairs with an immediately following \uDC00-\uDFFF */
            long lo = (s->end - next >= 6 && next[0] == '\\' && next[1] == 'u') ? hex4(s, next + 2) : -1;
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                next += 6;
            } else {
                cp = 0xFFFD; /* lone high surrogate */
            }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD; /* lone low surrogate */
        }
        *olen = o ? put_utf8(o, (unsigned long)cp) : 0;
        return next;
    }
    default:
        tb_fail(s, p, "invalid escape in string");
    }
    if (o)
        o[0] = c;
    *olen = 1;
    return p + 2;
}

/* The rest of a string from p (its first byte that needs attention), decoding into a
 * scratch buffer when out != NULL. start is the first byte of the string's content. */
static const uint8_t *string_slow(tb_scanner *s, const uint8_t *start, const uint8_t *p, tb_str *out, bool key)
{
    const uint8_t *end = s->end;
    uint8_t **buf = key ? &s->kscratch : &s->scratch;
    size_t *cap = key ? &s->kscratch_cap : &s->scratch_cap;
    size_t o = 0;
    if (out) {
        *buf = tb_grow(s, *buf, cap, (size_t)(p - start) + 64, 1);
        memcpy(*buf, start, (size_t)(p - start));
        o = (size_t)(p - start);
    }
    for (;;) {
        if (p >= end)
            tb_fail(s, p, "unterminated string");
        uint8_t c = *p;
        const uint8_t *q;
        if (c == '"') {
            if (out) {
                out->ptr = *buf;
                out->len = o;
            }
            return p + 1;
        } else if (c == '\\') {
            size_t n;
            if (out)
                *buf = tb_grow(s, *buf, cap, o + 4, 1);
            q = escape(s, p, out ? *buf + o : NULL, &n);
            o += n;
        } else if (c < 0x20) {
            tb_fail(s, p, "control character in string");
        } else {
            q = c >= 0x80 ? check_utf8(s, p) : p + 1;
            q = find_special(q, end);
            if (out) {
                *buf = tb_grow(s, *buf, cap, o + (size_t)(q - p), 1);
                memcpy(*buf + o, p, (size_t)(q - p));
                o += (size_t)(q - p);
            }
        }
        p = q;
    }
}

const uint8_t *tb_scan_string(tb_scanner *s, const uint8_t *p, tb_str *out, bool key)
{
    const uint8_t *start = p, *end = s->end;
    for (;;) {
        p = find_special(p, end);
        if (p >= end)
            tb_fail(s, p, "unterminated string");
        uint8_t c = *p;
        if (c == '"') {
            if (out) {
                out->ptr = start;
                out->len = (size_t)(p - start);
            }
            return p + 1;
        }
        if (c == '\\')
            return string_slow(s, start, p, out, key);
        if (c < 0x20)
            tb_fail(s, p, "control character in string");
        p = check_utf8(s, p);
    }
}

static inline bool is_digit(uint8_t c)
{
    return (uint8_t)(c - '0') < 10;
}

const uint8_t *tb_match_number(const uint8_t *p, const uint8_t *end)
{
    if (p < end && *p == '-')
        p++;
    if (p >= end)
        return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p++;
        while (p < end && is_digit(*p))
            p++;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p | 0x20) == 'e') {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
    }
    return p;
}

const uint8_t *tb_scan_number(tb_scanner *s, const uint8_t *p)
{
    const uint8_t *q = tb_match_number(p, s->end);
    if (!q)
        tb_fail(s, p, "invalid number");
    return q;
}

const uint8_t *tb_scan_literal(tb_scanner *s, const uint8_t *p)
{
    static const char *const words[] = {"true", "false", "null"};
    size_t avail = (size_t)(s->end - p);
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if (p < s->end && *p == (uint8_t)words[i][0]) {
            if (avail < n)
                tb_fail(s, s->end, "truncated literal");
            if (memcmp(p, words[i], n) != 0)
                tb_fail(s, p, "invalid literal");
            return p + n;
        }
    }
    tb_fail(s, p, "expected a JSON value");
}

/* Iterative (no recursion, so no stack overflow on hostile input); the explicit stack
 * remembers whether each open container is an object or an array. */
const uint8_t *tb_skip_value(tb_scanner *s, const uint8_t *p, int depth)
{
    const uint8_t *end = s->end;
    uint8_t stack[TB_MAX_DEPTH + 1];
    int sp = 0;
    uint8_t c;

value:
    c = tb_peek(s, p);
    switch (c) {
    case '"':
        p = tb_skip_string(s, p + 1);
        goto after_value;
    case '{':
    case '[':
        if (depth + sp + 1 > TB_MAX_DEPTH)
            tb_fail(s, p, "nesting deeper than 256");
        stack[sp++] = c;
        p = tb_skip_ws(p + 1, end);
        if (tb_peek(s, p) == (c == '{' ? '}' : ']')) {
            sp--;
            p++;
            goto after_value;
        }
        if (c == '{')
            goto key;
        goto value;
    case 't':
    case 'f':
    case 'n':
        p = tb_scan_literal(s, p);
        goto after_value;
    default:
        if (c == '-' || is_digit(c)) {
            p = tb_scan_number(s, p);
            goto after_value;
        }
        tb_fail(s, p, "expected a JSON value");
    }

key:
    if (tb_peek(s, p) != '"')
        tb_fail(s, p, "expected a string key");
    p = tb_skip_string(s, p + 1);
    p = tb_skip_ws(p, end);
    if (tb_peek(s, p) != ':')
        tb_fail(s, p, "expected ':'");
    p = tb_skip_ws(p + 1, end);
    goto value;

after_value:
    if (sp == 0)
        return p;
    p = tb_skip_ws(p, end);
    c = tb_peek(s, p);
    if (c == ',') {
        p = tb_skip_ws(p + 1, end);
        if (stack[sp - 1] == '{')
            goto key;
        goto value;
    }
    if (c == (stack[sp - 1] == '{' ? '}' : ']')) {
        sp--;
        p++;
        goto after_value;
    }
    tb_fail(s, p, stack[sp - 1] == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
}
