/* The trace walk; see decoder.h and tb_profiler/decode/schema.py for what each field
 * becomes. The walker knows the shape of a trace (top object or bare array, the events
 * array, each event, its args) and hands every other value to tb_skip_value, which
 * validates it without building anything.
 *
 * This file walks the document and each event; an event's args are decoder_args.c's, the
 * split of a big events array between threads is decoder_parallel.c's, and what they
 * share is decoder_walk.h. */
#include <stdlib.h>
#include <string.h>

#include "decoder_walk.h"

/* ------------------------------------------------------------------ events */

/* Per-event state besides the dense row. */
typedef struct {
    size_t w0;      /* blob write pointer when the event started */
    bool had_args;  /* an "args" key was seen (a repeated one replaces it) */
} event_state;

static const uint8_t *read_pid(tb_decoder *d, const uint8_t *p, int depth, int64_t *val, int32_t *sid)
{
    tb_val v;
    int64_t x;
    p = read_value(d, p, depth, true, &v);
    if (v.type == V_STRING) {
        *sid = intern(d, v.str.ptr, v.str.len);
        *val = val_to_int(&v, &x) ? x : 0;
    } else {
        *sid = -1;
        *val = val_to_int(&v, &x) ? x : TB_MISSING_INT;
    }
    return p;
}

/* Appends an event's args text to the blob and returns its offset there. In one pass
 * (and in the main thread) the blob is the front of the document itself: all of this
 * text has been read, and the write pointer trails it. A helper thread leaves the text
 * where it is (other threads may read there) and returns that place: the main thread
 * moves it into the blob when it merges the helper's events (merge_part). */
static int64_t store_args(tb_decoder *d, const uint8_t *a0, size_t n)
{
    if (d->is_part || d->keep_input)
        return (int64_t)(a0 - d->buf);
    if (d->par)
        tb_par_guard(d, d->buf + d->w + n);
    memmove(d->buf + d->w, a0, n);
    d->w += n;
    return (int64_t)(d->w - n);
}

static const uint8_t *read_event_args(tb_decoder *d, const uint8_t *p, int depth, int32_t row, tb_row *r,
                                      event_state *es)
{
    tb_scanner *s = &d->sc;
    if (es->had_args) {
        /* a repeated "args": the last one wins, so forget the earlier one */
        tb_drop_arg_columns(d, row);
        d->w = es->w0;
    }
    es->had_args = true;
    r->args_off = (int64_t)d->w;
    r->args_len = 0;
    if (tb_peek(s, p) != '{') {
        tb_val v;
        return read_value(d, p, depth, false, &v); /* not an object: no args */
    }
    const uint8_t *a0 = p;
    p = tb_read_args(d, p, depth + 1, row);
    size_t n = (size_t)(p - a0);
    if (n > INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, a0, "args object larger than 2^31-1 bytes");
    r->args_off = store_args(d, a0, n);
    r->args_len = (int32_t)n;
    return p;
}

/* One member of an event object; dispatch on key length, then compare bytes. */
static const uint8_t *event_member(tb_decoder *d, const tb_str *k, const uint8_t *p, int depth, int32_t row,
                                   tb_row *r, event_state *es)
{
    tb_scanner *s = &d->sc;
    tb_val v;
    int64_t x;
    switch (k->len) {
    case 2:
        if (key_is(k, "ph", 2)) {
            p = read_value(d, p, depth, true, &v);
            r->ph = (v.type == V_STRING && v.str.len) ? v.str.ptr[0] : 0;
            return p;
        }
        if (key_is(k, "ts", 2)) {
            p = read_value(d, p, depth, true, &v);
            r->ts = val_to_ns(&v);
            return p;
        }
        if (key_is(k, "id", 2)) {
            tb_sparse_drop(&d->sparse[SP_FLOW_ID], row);
            p = read_value(d, p, depth, true, &v);
            bool ok = (v.type == V_STRING && tb_hex_to_i64(v.str.ptr, v.str.len, &x)) || val_to_int(&v, &x);
            if (ok)
                tb_sparse_push(&d->sparse[SP_FLOW_ID], s, row, &x);
            return p;
        }
        if (key_is(k, "bp", 2)) {
            tb_sparse_drop(&d->sparse[SP_FLOW_BP], row);
            p = read_value(d, p, depth, true, &v);
            if (v.type == V_STRING && v.str.len)
                tb_sparse_push(&d->sparse[SP_FLOW_BP], s, row, v.str.ptr);
            return p;
        }
        break;
    case 3:
        if (key_is(k, "cat", 3)) {
            p = read_value(d, p, depth, true, &v);
            r->cat = val_text_id(d, &v);
            return p;
        }
        if (key_is(k, "pid", 3))
            return read_pid(d, p, depth, &r->pid, &r->pid_str);
        if (key_is(k, "tid", 3))
            return read_pid(d, p, depth, &r->tid, &r->tid_str);
        if (key_is(k, "dur", 3)) {
            p = read_value(d, p, depth, true, &v);
            r->dur = val_to_ns(&v);
            return p;
        }
        break;
    case 4:
        if (key_is(k, "name", 4)) {
            p = read_value(d, p, depth, true, &v);
            r->name = val_text_id(d, &v);
            return p;
        }
        if (key_is(k, "args", 4))
            return read_event_args(d, p, depth, row, r, es);
        break;
    }
    return skip_member_value(s, p, depth);
}

/* p at an event's '{' (depth = its nesting depth). */
static const uint8_t *read_event(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    if (d->dense.n >= INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, p, "more than 2^31-1 events");
    int32_t row = (int32_t)d->dense.n;
    tb_row r = {.ph = 0, .cat = -1, .name = -1, .pid = TB_MISSING_INT, .pid_str = -1,
                .tid = TB_MISSING_INT, .tid_str = -1, .ts = TB_MISSING_INT, .dur = TB_MISSING_INT,
                .args_off = (int64_t)d->w, .args_len = 0};
    event_state es = {.w0 = d->w, .had_args = false};
    const uint8_t *k = first_member(s, &p);
    while (k) {
        tb_str key;
        p = tb_scan_string(s, k + 1, &key, true);
        p = expect_colon(s, p);
        p = event_member(d, &key, p, depth, row, &r, &es);
        k = next_member(s, &p);
    }
    if (r.ph == 'C' && r.args_len > 0)
        tb_counter_event(d, &r, row);
    tb_dense_push(&d->dense, s, &r);
    return p;
}

/* The events from the one at p (a '{', or not: an error) to the array's ']' (depth = the
 * array's depth). With parts running, an event start that is a part's cut ends the walk:
 * a helper stops there, the main thread takes over that part's events. */
/* Adds the text walked since *mark to this decoder's progress slot (see decoder.h). */
static void publish_progress(tb_decoder *d, const uint8_t **mark, const uint8_t *p)
{
    d->walked += (int64_t)(p - *mark);
    *mark = p;
    __atomic_store_n(&d->progress[d->slot], d->walked, __ATOMIC_RELAXED);
}

#define TB_PROGRESS_EVERY 1024 /* events between two progress stores */

const uint8_t *tb_read_events_from(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    const uint8_t *mark = p;
    unsigned count = 0;
    for (;;) {
        if (tb_peek(s, p) != '{')
            tb_fail(s, p, "an event is not a JSON object");
        p = read_event(d, p, depth + 1);
        p = tb_skip_ws(p, s->end);
        uint8_t c = tb_peek(s, p);
        if (c == ',') {
            p = tb_skip_ws(p + 1, s->end);
        } else if (c == ']') {
            if (d->progress)
                publish_progress(d, &mark, p + 1);
            return p + 1;
        } else {
            tb_fail(s, p, "expected ',' or ']'");
        }
        if (d->progress && ++count % TB_PROGRESS_EVERY == 0)
            publish_progress(d, &mark, p);
        if (d->par) {
            if (d->progress)
                publish_progress(d, &mark, p); /* a merge below jumps p past the parts' text */
            const uint8_t *q = tb_par_landed(d, p);
            if (q)
                return q;
        }
    }
}

/* Columns sized for the events of text_bytes of JSON at once (see tb_dense_expect). */
void tb_expect_events(tb_decoder *d, size_t text_bytes)
{
    size_t guess = tb_dense_expect(&d->dense, &d->sc, text_bytes);
    for (int c = 0; c < TB_NSPARSE; c++)
        d->sparse[c].expect = guess;
}

/* p at the events array's '[' (depth = its nesting depth). */
static const uint8_t *read_events(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    p = tb_skip_ws(p + 1, s->end);
    if (tb_peek(s, p) == ']')
        return p + 1;
    tb_par_start(d, p, depth);
    tb_expect_events(d, (size_t)((d->par ? tb_par_first_cut(d) : s->end) - p));
    return tb_read_events_from(d, p, depth);
}

/* ------------------------------------------------------------------ top level */

static uint8_t *copy_bytes(tb_scanner *s, const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n + 1);
    if (!c)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    memcpy(c, p, n);
    return c;
}

/* Keeps a copy: a member before traceEvents is overwritten by args compaction later. */
static void add_toplevel(tb_decoder *d, const tb_str *key, const uint8_t *v0, const uint8_t *v1)
{
    tb_scanner *s = &d->sc;
    d->top = tb_grow(s, d->top, &d->top_cap, d->ntop + 1, sizeof *d->top);
    tb_topentry *e = &d->top[d->ntop];
    memset(e, 0, sizeof *e);
    d->ntop++; /* counted before the copies so a failed copy is still freed */
    e->key = copy_bytes(s, key->ptr, key->len);
    e->klen = key->len;
    e->val = copy_bytes(s, v0, (size_t)(v1 - v0));
    e->vlen = (size_t)(v1 - v0);
}

/* A second traceEvents replaces the first (json.loads keeps the last). */
static void reset_events(tb_decoder *d)
{
    d->dense.n = 0;
    for (int c = 0; c < TB_NSPARSE; c++)
        d->sparse[c].n = 0;
    d->w = 0;
}

static const uint8_t *read_top_object(tb_decoder *d, const uint8_t *p)
{
    tb_scanner *s = &d->sc;
    const uint8_t *k = first_member(s, &p);
    while (k) {
        tb_str key;
        p = tb_scan_string(s, k + 1, &key, true);
        p = expect_colon(s, p);
        if (key_is(&key, "traceEvents", 11)) {
            if (tb_peek(s, p) != '[') {
                tb_skip_value(s, p, 1); /* a syntax error inside wins over the shape error */
                tb_fail(s, p, "traceEvents is not an array");
            }
            reset_events(d);
            p = read_events(d, p, 2);
            tb_par_finish(d);
            d->found_events = true;
        } else {
            const uint8_t *v = p;
            p = tb_skip_value(s, p, 1);
            add_toplevel(d, &key, v, p);
        }
        k = next_member(s, &p);
    }
    if (!d->found_events)
        tb_fail_kind(s, TB_ERR_FORMAT, s->base, "no traceEvents in the top-level object");
    return p;
}

int tb_decode(tb_decoder *d, uint8_t *buf, size_t len)
{
    tb_scanner *s = &d->sc;
    d->buf = buf;
    s->base = buf;
    s->end = buf + len;
    for (int c = 0; c < TB_NSPARSE; c++)
        d->sparse[c].itemsize = tb_sparse_specs[c].itemsize;
    if (setjmp(s->jb)) {
        tb_par_finish(d);
        return -1;
    }
    const uint8_t *p = buf;
    if (len >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF)
        p += 3; /* UTF-8 byte order mark */
    p = tb_skip_ws(p, s->end);
    if (p >= s->end)
        tb_fail_kind(s, TB_ERR_FORMAT, p, "empty trace (no JSON value)");
    if (*p == '[') {
        p = read_events(d, p, 1);
        tb_par_finish(d);
    } else if (*p == '{') {
        p = read_top_object(d, p);
    } else {
        tb_skip_value(s, p, 0);
        tb_fail(s, p, "the trace is neither an object nor an array");
    }
    p = tb_skip_ws(p, s->end);
    if (p != s->end)
        tb_fail(s, p, "trailing data after the JSON document");
    return 0;
}

void tb_decoder_free(tb_decoder *d)
{
    tb_scanner_free(&d->sc);
    tb_intern_free(&d->strings);
    tb_dense_free(&d->dense);
    for (int c = 0; c < TB_NSPARSE; c++)
        tb_sparse_free(&d->sparse[c]);
    for (size_t i = 0; i < d->ntop; i++) {
        free(d->top[i].key);
        free(d->top[i].val);
    }
    free(d->top);
    d->top = NULL;
    d->ntop = d->top_cap = 0;
    free(d->cmembers);
    free(d->ckeys);
    d->cmembers = NULL;
    d->ckeys = NULL;
}
