/* Low-level JSON scanning: whitespace, strings (with strict UTF-8 validation and escape
 * decoding), number tokens, and validating skips of whole values.
 *
 * Everything here works on a [base, end) byte range and never reads outside it. Errors
 * do not return: tb_fail() longjmps to the tb_scanner's jmp_buf, which the decoder set up
 * (it owns every allocation, so nothing leaks when a scan aborts half way).
 */
#ifndef TB_JSON_SCAN_H
#define TB_JSON_SCAN_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TB_MAX_DEPTH 256 /* schema.MAX_DEPTH: the outermost container is depth 1 */

typedef enum { TB_OK = 0, TB_ERR_FORMAT, TB_ERR_NOMEM, TB_ERR_LIMIT } tb_err_kind;

typedef struct {
    const uint8_t *base; /* first byte of the document: error offsets are relative to it */
    const uint8_t *end;  /* one past the last byte */
    jmp_buf jb;
    tb_err_kind err_kind;
    const char *err_msg;
    size_t err_off;
    uint8_t *scratch; /* decoded string values (escapes resolved) */
    size_t scratch_cap;
    uint8_t *kscratch; /* decoded keys with escapes; separate so a key survives its value */
    size_t kscratch_cap;
} tb_scanner;

/* A string value: either a slice of the document (no escapes) or of a scratch buffer. */
typedef struct {
    const uint8_t *ptr;
    size_t len;
} tb_str;

_Noreturn void tb_fail(tb_scanner *s, const uint8_t *at, const char *msg);
_Noreturn void tb_fail_kind(tb_scanner *s, tb_err_kind kind, const uint8_t *at, const char *msg);
void *tb_grow(tb_scanner *s, void *ptr, size_t *cap, size_t need, size_t elem);

extern const uint8_t tb_ws_table[256];

static inline const uint8_t *tb_skip_ws(const uint8_t *p, const uint8_t *end)
{
    while (p < end && tb_ws_table[*p])
        p++;
    return p;
}

/* The byte at p, failing with "unexpected end" when p is at the end. */
static inline uint8_t tb_peek(tb_scanner *s, const uint8_t *p)
{
    if (p >= s->end)
        tb_fail(s, p, "unexpected end of data");
    return *p;
}

/* p is just after an opening quote. Validates the string and returns the position just
 * after its closing quote. With out != NULL the decoded value is stored there (a slice of
 * the document when the string has no escapes, else of s->scratch, or s->kscratch when
 * key is true). */
const uint8_t *tb_scan_string(tb_scanner *s, const uint8_t *p, tb_str *out, bool key);

/* Validates a string at an arbitrary position: p just after the opening quote. */
static inline const uint8_t *tb_skip_string(tb_scanner *s, const uint8_t *p)
{
    return tb_scan_string(s, p, NULL, false);
}

/* The longest JSON number (RFC 8259 grammar) at p, or NULL when there is none. */
const uint8_t *tb_match_number(const uint8_t *p, const uint8_t *end);

/* A number token at p (its first byte is '-' or a digit): returns its end or fails. */
const uint8_t *tb_scan_number(tb_scanner *s, const uint8_t *p);

/* Validates one JSON value at p (no leading whitespace) nested in `depth` open containers;
 * returns the position just after it. */
const uint8_t *tb_skip_value(tb_scanner *s, const uint8_t *p, int depth);

/* Validates a literal true/false/null at p. */
const uint8_t *tb_scan_literal(tb_scanner *s, const uint8_t *p);

void tb_scanner_free(tb_scanner *s);

#endif
