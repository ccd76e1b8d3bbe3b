/* Number text -> exact values; see numbers.h.
 *
 * Integers and nanosecond timestamps never go through a double: Kineto writes
 * microseconds with 3 decimals around 1.6e15 ns, past float64's 2^53 exact range, so
 * the digits are accumulated directly (with the decimal exponent applied by position).
 */
#define _GNU_SOURCE /* strtod_l / newlocale: strtod that ignores the process locale */
#include "numbers.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"

#if defined(__GLIBC__) || defined(__APPLE__)
#define TB_HAVE_STRTOD_L 1
#ifdef __APPLE__
#include <xlocale.h>
#endif
static locale_t c_locale;
#endif

bool tb_numbers_init(void)
{
#ifdef TB_HAVE_STRTOD_L
    if (!c_locale)
        c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return c_locale != (locale_t)0;
#else
    return true;
#endif
}

/* A JSON number split into its parts: value = (int digits . frac digits) * 10^exp. */
typedef struct {
    bool neg;
    const uint8_t *ip, *fp;
    size_t ni, nf;
    int64_t exp; /* clamped to +-1e9: beyond that every nonzero value is out of range */
} num_parts;

static inline bool is_digit(uint8_t c)
{
    return (uint8_t)(c - '0') < 10;
}

static bool split(const uint8_t *p, size_t n, num_parts *x)
{
    const uint8_t *end = p + n;
    x->neg = p < end && *p == '-';
    if (x->neg)
        p++;
    x->ip = p;
    while (p < end && is_digit(*p))
        p++;
    x->ni = (size_t)(p - x->ip);
    if (x->ni == 0)
        return false;
    x->fp = p;
    x->nf = 0;
    if (p < end && *p == '.') {
        x->fp = ++p;
        while (p < end && is_digit(*p))
            p++;
        x->nf = (size_t)(p - x->fp);
    }
    x->exp = 0;
    if (p < end && (*p | 0x20) == 'e') {
        bool eneg = false;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        while (p < end && is_digit(*p)) {
            if (x->exp < 1000000000)
                x->exp = x->exp * 10 + (*p - '0');
            p++;
        }
        if (eneg)
            x->exp = -x->exp;
    }
    return p == end;
}

/* The i-th digit of the int digits followed by the fraction digits, as a number. */
static inline unsigned digit_at(const num_parts *x, int64_t i)
{
    return (unsigned)((size_t)i < x->ni ? x->ip[i] : x->fp[(size_t)i - x->ni]) - '0';
}

static bool any_nonzero(const num_parts *x, int64_t from, int64_t to)
{
    for (int64_t i = from; i < to; i++)
        if (digit_at(x, i))
            return true;
    return false;
}

/* The common shapes, "123" and "123.456" (at most `scale` fraction digits, at most 18
 * digits in all, so the accumulator cannot overflow): no rounding needed. */
static inline bool fast_i64(const uint8_t *p, size_t n, int scale, int64_t *out)
{
    static const int64_t pow10[4] = {1, 10, 100, 1000};
    const uint8_t *end = p + n;
    if (scale > 3 || n > 19) /* so at most 19 digits: no overflow of the uint64 below */
        return false;
    bool neg = p < end && *p == '-';
    p += neg;
    const uint8_t *q = p;
    uint64_t u = 0;
    while (q < end && is_digit(*q))
        u = u * 10 + (uint64_t)(*q++ - '0');
    int digits = (int)(q - p);
    if (digits == 0)
        return false;
    int frac = 0;
    if (q < end && *q == '.') {
        q++;
        while (q < end && is_digit(*q) && frac < scale) {
            u = u * 10 + (uint64_t)(*q++ - '0');
            frac++;
        }
    }
    if (q != end || digits + frac > 18)
        return false; /* more fraction digits, an exponent, or long: the general path */
    int64_t v = (int64_t)u; /* < 10^18 */
    if (__builtin_mul_overflow(v, pow10[scale - frac], &v))
        return false;
    *out = neg ? -v : v;
    return true;
}

bool tb_num_to_i64(const uint8_t *p, size_t n, int scale, bool round_half_even, int64_t *out)
{
    if (fast_i64(p, n, scale, out))
        return true;
    num_parts x;
    if (!split(p, n, &x))
        return false;
    int64_t total = (int64_t)(x.ni + x.nf);
    int64_t shift = x.exp - (int64_t)x.nf + scale; /* value = digits * 10^shift */
    uint64_t limit = x.neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
    int64_t keep = shift >= 0 ? total : total + shift; /* digits above the unit */
    uint64_t acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        unsigned d = digit_at(&x, i);
        if (acc > (limit - d) / 10)
            return false;
        acc = acc * 10 + d;
    }
    if (shift > 0 && acc) {
        for (int64_t k = 0; k < shift; k++) {
            if (acc > limit / 10)
                return false;
            acc *= 10;
        }
    } else if (shift < 0) {
        int64_t first = keep < 0 ? 0 : keep; /* first dropped digit that is written */
        if (!round_half_even) {
            if (any_nonzero(&x, first, total))
                return false;
        } else if (keep >= 0) {
            /* keep < 0 means the value is below 0.1 of a unit: rounds to 0 */
            unsigned r0 = digit_at(&x, keep);
            bool up = r0 > 5 || (r0 == 5 && (any_nonzero(&x, keep + 1, total) || (acc & 1)));
            if (up) {
                if (acc >= limit)
                    return false;
                acc++;
            }
        }
    }
    if (x.neg)
        *out = acc == ((uint64_t)1 << 63) ? INT64_MIN : -(int64_t)acc;
    else
        *out = (int64_t)acc;
    return true;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

bool tb_num_to_double(const uint8_t *p, size_t n, double *out)
{
    num_parts x;
    if (!split(p, n, &x))
        return false;
    /* Fast path (Clinger): a mantissa below 2^53 and a power of ten below 1e23 are both
     * exact doubles, so one IEEE multiply or divide rounds correctly. */
    uint64_t m = 0;
    int sig = 0;
    bool exact = true;
    int64_t total = (int64_t)(x.ni + x.nf);
    for (int64_t i = 0; i < total; i++) {
        unsigned d = digit_at(&x, i);
        if (m == 0 && d == 0)
            continue;
        if (++sig > 19) {
            exact = false;
            break;
        }
        m = m * 10 + d;
    }
    int64_t e10 = x.exp - (int64_t)x.nf;
    if (exact && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
        double d = (double)m;
        d = e10 < 0 ? d / pow10_exact[-e10] : d * pow10_exact[e10];
        *out = x.neg ? -d : d;
        return true;
    }
    /* Slow path: the C library's correctly rounded strtod on a NUL-terminated copy. */
    char small[128];
    char *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return false;
    memcpy(buf, p, n);
    buf[n] = 0;
#ifdef TB_HAVE_STRTOD_L
    *out = strtod_l(buf, NULL, c_locale);
#else
    {
        /* the process locale may want another decimal point */
        const char *dp = localeconv()->decimal_point;
        char *dot = strchr(buf, '.');
        if (dot && dp && dp[0] && dp[1] == 0)
            *dot = dp[0];
        *out = strtod(buf, NULL);
    }
#endif
    if (buf != small)
        free(buf);
    return true;
}

bool tb_is_number_text(const uint8_t *p, size_t n)
{
    return n > 0 && tb_match_number(p, p + n) == p + n;
}

static int hexval(uint8_t c)
{
    if (is_digit(c))
        return c - '0';
    c |= 0x20;
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

bool tb_hex_to_i64(const uint8_t *p, size_t n, int64_t *out)
{
    if (n < 3 || p[0] != '0' || (p[1] | 0x20) != 'x')
        return false;
    uint64_t acc = 0;
    for (size_t i = 2; i < n; i++) {
        int h = hexval(p[i]);
        if (h < 0 || acc > (uint64_t)INT64_MAX >> 4)
            return false;
        acc = acc * 16 + (uint64_t)h;
    }
    if (acc > (uint64_t)INT64_MAX)
        return false;
    *out = (int64_t)acc;
    return true;
}
