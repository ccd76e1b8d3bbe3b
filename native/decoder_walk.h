/* Internals of the trace walk (decoder.h), shared by its three files and by no one else:
 *
 *   decoder.c           the document: the top object or bare array, the events array, each
 *                       event's members (ph, ts, dur, pid, tid, name, cat, id, bp, args)
 *   decoder_args.c      the column tables, and an event's args: the members the schema
 *                       extracts into sparse columns, and a counter event's value
 *   decoder_parallel.c  a big events array split between threads, merged as one pass
 *
 * Reading one value and stepping through an object's members run for every member of
 * every event, so they are static inline here rather than calls into another file. */
#ifndef TB_DECODER_WALK_H
#define TB_DECODER_WALK_H

#include <string.h>

#include "decoder.h"
#include "numbers.h"

#ifndef _WIN32
#define TB_PARALLEL 1
#endif

/* Sparse columns the walk writes itself (the args columns lie between SP_FLOW_BP and
 * SP_COUNTER_KEY, in tb_sparse_specs order). */
enum {
    SP_FLOW_ID = 0,
    SP_FLOW_BP = 1,
    SP_COUNTER_KEY = TB_NSPARSE - 2,
    SP_COUNTER_VALUE = TB_NSPARSE - 1,
};

/* -- values -------------------------------------------------------------------------- */

typedef enum { V_NUMBER, V_STRING, V_OTHER } vtype;

/* One member value: its raw text [start, end) and, for a string, the decoded text. */
typedef struct {
    vtype type;
    const uint8_t *start, *end;
    tb_str str;
} tb_val;

static inline bool is_digit(uint8_t c)
{
    return (uint8_t)(c - '0') < 10;
}

/* Reads (and validates) the value at p, nested in `depth` open containers. */
static inline const uint8_t *read_value(tb_decoder *d, const uint8_t *p, int depth, bool decode, tb_val *v)
{
    tb_scanner *s = &d->sc;
    uint8_t c = tb_peek(s, p);
    v->start = p;
    if (c == '"') {
        v->type = V_STRING;
        p = tb_scan_string(s, p + 1, decode ? &v->str : NULL, false);
    } else if (c == '-' || is_digit(c)) {
        v->type = V_NUMBER;
        p = tb_scan_number(s, p);
    } else {
        v->type = V_OTHER;
        p = tb_skip_value(s, p, depth);
    }
    v->end = p;
    return p;
}

/* The JSON number text of a value: a number, or a string whose whole content is one. */
static inline bool number_text(const tb_val *v, const uint8_t **p, size_t *n)
{
    if (v->type == V_NUMBER) {
        *p = v->start;
        *n = (size_t)(v->end - v->start);
        return true;
    }
    if (v->type == V_STRING && tb_is_number_text(v->str.ptr, v->str.len)) {
        *p = v->str.ptr;
        *n = v->str.len;
        return true;
    }
    return false;
}

/* Integer rule: exact integer value within int64. */
static inline bool val_to_int(const tb_val *v, int64_t *out)
{
    const uint8_t *p;
    size_t n;
    return number_text(v, &p, &n) && tb_num_to_i64(p, n, 0, false, out);
}

/* ts/dur: microseconds text -> exact nanoseconds, half to even. */
static inline int64_t val_to_ns(const tb_val *v)
{
    const uint8_t *p;
    size_t n;
    int64_t out;
    if (number_text(v, &p, &n) && tb_num_to_i64(p, n, 3, true, &out))
        return out;
    return TB_MISSING_INT;
}

static inline int32_t intern(tb_decoder *d, const uint8_t *p, size_t n)
{
    return tb_intern_get(&d->strings, &d->sc, p, n);
}

/* "text" fields: the decoded string, or the raw JSON text of a non-string value. */
static inline int32_t val_text_id(tb_decoder *d, const tb_val *v)
{
    if (v->type == V_STRING)
        return intern(d, v->str.ptr, v->str.len);
    return intern(d, v->start, (size_t)(v->end - v->start));
}

static inline const uint8_t *expect_colon(tb_scanner *s, const uint8_t *p)
{
    p = tb_skip_ws(p, s->end);
    if (tb_peek(s, p) != ':')
        tb_fail(s, p, "expected ':'");
    return tb_skip_ws(p + 1, s->end);
}

/* After a member: returns the next key's position (after ',') or NULL at '}'. */
static inline const uint8_t *next_member(tb_scanner *s, const uint8_t **pp)
{
    const uint8_t *p = tb_skip_ws(*pp, s->end);
    uint8_t c = tb_peek(s, p);
    if (c == ',') {
        p = tb_skip_ws(p + 1, s->end);
        if (tb_peek(s, p) != '"')
            tb_fail(s, p, "expected a string key");
        return p;
    }
    if (c == '}') {
        *pp = p + 1;
        return NULL;
    }
    tb_fail(s, p, "expected ',' or '}'");
}

/* p at '{': the first key's position, or NULL for an empty object (then *pp is past it). */
static inline const uint8_t *first_member(tb_scanner *s, const uint8_t **pp)
{
    const uint8_t *p = tb_skip_ws(*pp + 1, s->end);
    uint8_t c = tb_peek(s, p);
    if (c == '}') {
        *pp = p + 1;
        return NULL;
    }
    if (c != '"')
        tb_fail(s, p, "expected a string key");
    return p;
}

/* Skips a value we do not extract; strings and numbers (most of them) inline. */
static inline const uint8_t *skip_member_value(tb_scanner *s, const uint8_t *p, int depth)
{
    uint8_t c = tb_peek(s, p);
    if (c == '"')
        return tb_skip_string(s, p + 1);
    if (c == '-' || is_digit(c))
        return tb_scan_number(s, p);
    return tb_skip_value(s, p, depth);
}

static inline bool key_is(const tb_str *k, const char *lit, size_t n)
{
    return k->len == n && memcmp(k->ptr, lit, n) == 0;
}

/* -- between the files ------------------------------------------------------------------- */

/* decoder.c: the events from the one at p to the array's ']' (a helper part's walk too). */
const uint8_t *tb_read_events_from(tb_decoder *d, const uint8_t *p, int depth);

/* decoder.c: columns sized at once for the events of text_bytes of JSON */
void tb_expect_events(tb_decoder *d, size_t text_bytes);

/* decoder_args.c */
void tb_drop_arg_columns(tb_decoder *d, int32_t row);
const uint8_t *tb_read_args(tb_decoder *d, const uint8_t *p, int depth, int32_t row);
void tb_counter_event(tb_decoder *d, const tb_row *r, int32_t row);

/* decoder_parallel.c (stubs where there are no threads) */
bool tb_par_start(tb_decoder *d, const uint8_t *p, int depth);
void tb_par_guard(tb_decoder *d, const uint8_t *write_end);
void tb_par_finish(tb_decoder *d);
const uint8_t *tb_par_landed(tb_decoder *d, const uint8_t *p);
const uint8_t *tb_par_first_cut(tb_decoder *d); /* d->par set: where the main walk's part ends */

#endif
