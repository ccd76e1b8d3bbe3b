/* The trace walk; see decoder.h and tb_profiler/decode/schema.py for what each field
 * becomes. The walker knows the shape of a trace (top object or bare array, the events
 * array, each event, its args) and hands every other value to tb_skip_value, which
 * validates it without building anything. */
#include "decoder.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifndef _WIN32
#include <pthread.h>
#define TB_PARALLEL 1
#endif

#include "numbers.h"

/* ------------------------------------------------------------------ column tables */

enum {
    SP_FLOW_ID = 0,
    SP_FLOW_BP = 1,
    SP_COUNTER_KEY = TB_NSPARSE - 2,
    SP_COUNTER_VALUE = TB_NSPARSE - 1,
};

const tb_colspec tb_sparse_specs[TB_NSPARSE] = {
    {"flow_id", 'q', 8, false}, {"flow_bp", 'B', 1, false},
    /* ARG_INT */
    {"external_id", 'q', 8, false}, {"correlation", 'q', 8, false}, {"seq_num", 'q', 8, false}, {"fwd_tid", 'q', 8, false},
    {"record_function_id", 'q', 8, false}, {"ev_idx", 'q', 8, false}, {"python_id", 'q', 8, false},
    {"python_parent_id", 'q', 8, false}, {"python_module_id", 'q', 8, false}, {"python_tid", 'q', 8, false},
    {"device", 'q', 8, false}, {"stream", 'q', 8, false}, {"context", 'q', 8, false}, {"registers", 'q', 8, false},
    {"shared_memory", 'q', 8, false}, {"queued", 'q', 8, false}, {"copy_bytes", 'q', 8, false}, {"mem_bytes", 'q', 8, false},
    {"addr", 'q', 8, false}, {"total_allocated", 'q', 8, false}, {"total_reserved", 'q', 8, false},
    {"device_type", 'q', 8, false}, {"device_id", 'q', 8, false}, {"in_msg_nelems", 'q', 8, false},
    {"out_msg_nelems", 'q', 8, false}, {"group_size", 'q', 8, false}, {"rank", 'q', 8, false}, {"seq", 'q', 8, false},
    {"sort_index", 'q', 8, false}, {"flops", 'q', 8, false}, {"graph_id", 'q', 8, false}, {"graph_node_id", 'q', 8, false},
    /* ARG_FLOAT */
    {"blocks_per_sm", 'd', 8, false}, {"warps_per_sm", 'd', 8, false}, {"occupancy", 'd', 8, false}, {"bandwidth", 'd', 8, false},
    /* ARG_DIM3 */
    {"grid_x", 'i', 4, false}, {"grid_y", 'i', 4, false}, {"grid_z", 'i', 4, false},
    {"block_x", 'i', 4, false}, {"block_y", 'i', 4, false}, {"block_z", 'i', 4, false},
    /* ARG_TEXT */
    {"call_stack", 'i', 4, true}, {"collective_name", 'i', 4, true}, {"dtype", 'i', 4, true}, {"pg_name", 'i', 4, true},
    {"pg_desc", 'i', 4, true}, {"arg_name", 'i', 4, true},
    /* ARG_JSON */
    {"input_dims", 'i', 4, true}, {"input_type", 'i', 4, true}, {"input_strides", 'i', 4, true},
    {"concrete_inputs", 'i', 4, true}, {"pg_ranks", 'i', 4, true},
    /* COUNTER */
    {"counter_key", 'i', 4, true}, {"counter_value", 'd', 8, false},
};

typedef enum { ARG_INT, ARG_FLOAT, ARG_DIM3, ARG_TEXT, ARG_JSON } arg_kind;

/* The args keys the schema extracts (exact Kineto spelling) and their first column. */
typedef struct {
    const char *key;
    const char *column; /* for dim3: the _x column; _y and _z follow it */
    arg_kind kind;
    size_t klen;
    int col;
} arg_def;

static arg_def arg_defs[] = {
    {"External id", "external_id", ARG_INT, 0, 0},
    {"external id", "external_id", ARG_INT, 0, 0}, /* schema.ARG_ALIASES: PyTorch 1.8/1.9 */
    {"correlation", "correlation", ARG_INT, 0, 0},
    {"Sequence number", "seq_num", ARG_INT, 0, 0},
    {"Fwd thread id", "fwd_tid", ARG_INT, 0, 0},
    {"Record function id", "record_function_id", ARG_INT, 0, 0},
    {"Ev Idx", "ev_idx", ARG_INT, 0, 0},
    {"Python id", "python_id", ARG_INT, 0, 0},
    {"Python parent id", "python_parent_id", ARG_INT, 0, 0},
    {"Python module id", "python_module_id", ARG_INT, 0, 0},
    {"Python thread", "python_tid", ARG_INT, 0, 0},
    {"device", "device", ARG_INT, 0, 0},
    {"stream", "stream", ARG_INT, 0, 0},
    {"context", "context", ARG_INT, 0, 0},
    {"registers per thread", "registers", ARG_INT, 0, 0},
    {"shared memory", "shared_memory", ARG_INT, 0, 0},
    {"queued", "queued", ARG_INT, 0, 0},
    {"bytes", "copy_bytes", ARG_INT, 0, 0},
    {"Bytes", "mem_bytes", ARG_INT, 0, 0},
    {"Addr", "addr", ARG_INT, 0, 0},
    {"Total Allocated", "total_allocated", ARG_INT, 0, 0},
    {"Total Reserved", "total_reserved", ARG_INT, 0, 0},
    {"Device Type", "device_type", ARG_INT, 0, 0},
    {"Device Id", "device_id", ARG_INT, 0, 0},
    {"In msg nelems", "in_msg_nelems", ARG_INT, 0, 0},
    {"Out msg nelems", "out_msg_nelems", ARG_INT, 0, 0},
    {"Group size", "group_size", ARG_INT, 0, 0},
    {"Rank", "rank", ARG_INT, 0, 0},
    {"Seq", "seq", ARG_INT, 0, 0},
    {"sort_index", "sort_index", ARG_INT, 0, 0},
    {"flops", "flops", ARG_INT, 0, 0},
    {"graph id", "graph_id", ARG_INT, 0, 0},
    {"graph node id", "graph_node_id", ARG_INT, 0, 0},
    {"blocks per SM", "blocks_per_sm", ARG_FLOAT, 0, 0},
    {"warps per SM", "warps_per_sm", ARG_FLOAT, 0, 0},
    {"est. achieved occupancy %", "occupancy", ARG_FLOAT, 0, 0},
    {"memory bandwidth (GB/s)", "bandwidth", ARG_FLOAT, 0, 0},
    {"grid", "grid_x", ARG_DIM3, 0, 0},
    {"block", "block_x", ARG_DIM3, 0, 0},
    {"Call stack", "call_stack", ARG_TEXT, 0, 0},
    {"Collective name", "collective_name", ARG_TEXT, 0, 0},
    {"dtype", "dtype", ARG_TEXT, 0, 0},
    {"Process Group Name", "pg_name", ARG_TEXT, 0, 0},
    {"Process Group Description", "pg_desc", ARG_TEXT, 0, 0},
    {"name", "arg_name", ARG_TEXT, 0, 0},
    {"Input Dims", "input_dims", ARG_JSON, 0, 0},
    {"Input dims", "input_dims", ARG_JSON, 0, 0}, /* schema.ARG_ALIASES: PyTorch 1.8 */
    {"Input type", "input_type", ARG_JSON, 0, 0},
    {"Input Strides", "input_strides", ARG_JSON, 0, 0},
    {"Concrete Inputs", "concrete_inputs", ARG_JSON, 0, 0},
    {"Process Group Ranks", "pg_ranks", ARG_JSON, 0, 0},
};
#define N_ARG_DEFS (sizeof arg_defs / sizeof arg_defs[0])

/* Args key lookup: open addressing over a cheap hash of length and a few bytes (keys are
 * short and few); -1 marks an empty slot. */
#define ARG_SLOTS 256
static int8_t arg_slots[ARG_SLOTS];

static inline unsigned arg_hash(const uint8_t *p, size_t n)
{
    uint32_t a = (uint32_t)p[0] | (uint32_t)p[n >> 1] << 8 | (uint32_t)p[n - 1] << 16;
    return ((a * 0x9E3779B1u) ^ ((uint32_t)n * 0x85EBCA6Bu)) >> 24;
}

static int arg_lookup(const uint8_t *p, size_t n)
{
    if (n == 0)
        return -1;
    unsigned i = arg_hash(p, n);
    for (;;) {
        int a = arg_slots[i];
        if (a < 0)
            return -1;
        if (arg_defs[a].klen == n && memcmp(arg_defs[a].key, p, n) == 0)
            return a;
        i = (i + 1) & (ARG_SLOTS - 1);
    }
}

static int sparse_index(const char *name)
{
    for (int i = 0; i < TB_NSPARSE; i++)
        if (strcmp(tb_sparse_specs[i].name, name) == 0)
            return i;
    return -1;
}

bool tb_decoder_global_init(void)
{
    memset(arg_slots, -1, sizeof arg_slots);
    for (size_t a = 0; a < N_ARG_DEFS; a++) {
        arg_defs[a].klen = strlen(arg_defs[a].key);
        arg_defs[a].col = sparse_index(arg_defs[a].column);
        if (arg_defs[a].col < 0)
            return false;
        unsigned i = arg_hash((const uint8_t *)arg_defs[a].key, arg_defs[a].klen);
        while (arg_slots[i] >= 0)
            i = (i + 1) & (ARG_SLOTS - 1);
        arg_slots[i] = (int8_t)a;
    }
    return tb_numbers_init();
}

/* ------------------------------------------------------------------ values */

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

/* ------------------------------------------------------------------ args */

static void drop_arg_columns(tb_decoder *d, int32_t row)
{
    for (int c = SP_FLOW_BP + 1; c < SP_COUNTER_KEY; c++)
        tb_sparse_drop(&d->sparse[c], row);
}

static const uint8_t *read_dim3(tb_decoder *d, const uint8_t *p, int depth, int32_t row, int col)
{
    tb_scanner *s = &d->sc;
    for (int a = 0; a < 3; a++)
        tb_sparse_drop(&d->sparse[col + a], row);
    if (tb_peek(s, p) != '[') {
        tb_val v;
        return read_value(d, p, depth, false, &v);
    }
    if (depth + 1 > TB_MAX_DEPTH)
        tb_fail(s, p, "nesting deeper than 256");
    int32_t xyz[3];
    int n = 0;
    bool ok = true;
    p = tb_skip_ws(p + 1, s->end);
    if (tb_peek(s, p) == ']')
        return p + 1;
    for (;;) {
        tb_val v;
        int64_t x;
        p = read_value(d, p, depth + 1, true, &v);
        if (n < 3 && val_to_int(&v, &x) && x >= INT32_MIN && x <= INT32_MAX)
            xyz[n] = (int32_t)x;
        else
            ok = false;
        n++;
        p = tb_skip_ws(p, s->end);
        uint8_t c = tb_peek(s, p);
        if (c == ',') {
            p = tb_skip_ws(p + 1, s->end);
        } else if (c == ']') {
            p++;
            break;
        } else {
            tb_fail(s, p, "expected ',' or ']'");
        }
    }
    if (ok && n == 3)
        for (int a = 0; a < 3; a++)
            tb_sparse_push(&d->sparse[col + a], s, row, &xyz[a]);
    return p;
}

/* One args member whose key the schema extracts. */
static const uint8_t *read_arg(tb_decoder *d, const arg_def *def, const uint8_t *p, int depth, int32_t row)
{
    tb_scanner *s = &d->sc;
    tb_sparse *col = &d->sparse[def->col];
    tb_val v;
    int64_t i64;
    double f64;
    int32_t id;
    if (def->kind == ARG_DIM3)
        return read_dim3(d, p, depth, row, def->col);
    tb_sparse_drop(col, row);
    switch (def->kind) {
    case ARG_INT:
        p = read_value(d, p, depth, true, &v);
        if (val_to_int(&v, &i64))
            tb_sparse_push(col, s, row, &i64);
        break;
    case ARG_FLOAT: {
        const uint8_t *t;
        size_t n;
        p = read_value(d, p, depth, true, &v);
        if (number_text(&v, &t, &n) && tb_num_to_double(t, n, &f64))
            tb_sparse_push(col, s, row, &f64);
        break;
    }
    case ARG_TEXT:
        p = read_value(d, p, depth, true, &v);
        id = val_text_id(d, &v);
        tb_sparse_push(col, s, row, &id);
        break;
    default: /* ARG_JSON: the raw text, byte for byte */
        p = read_value(d, p, depth, false, &v);
        id = intern(d, v.start, (size_t)(v.end - v.start));
        tb_sparse_push(col, s, row, &id);
        break;
    }
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

/* p at the args object's '{' (depth = its nesting depth). Returns the byte after '}'. */
static const uint8_t *read_args(tb_decoder *d, const uint8_t *p, int depth, int32_t row)
{
    tb_scanner *s = &d->sc;
    if (depth > TB_MAX_DEPTH)
        tb_fail(s, p, "nesting deeper than 256");
    const uint8_t *k = first_member(s, &p);
    while (k) {
        tb_str key;
        p = tb_scan_string(s, k + 1, &key, true);
        p = expect_colon(s, p);
        int a = arg_lookup(key.ptr, key.len);
        if (a < 0)
            p = skip_member_value(s, p, depth);
        else
            p = read_arg(d, &arg_defs[a], p, depth, row);
        k = next_member(s, &p);
    }
    return p;
}

/* ------------------------------------------------------------------ counters */

/* qsort has no context argument in C11, so the key bytes come through a thread-local
 * (decoders may run in several threads at once: the GIL is released). */
static _Thread_local const uint8_t *cmp_keys;

static bool same_key(const tb_cmember *x, const tb_cmember *y, const uint8_t *keys)
{
    return x->klen == y->klen && memcmp(keys + x->koff, keys + y->koff, x->klen) == 0;
}

/* Orders by key bytes, then by position (so each key's members are adjacent, in order). */
static int cmp_cmember(const void *a, const void *b)
{
    const tb_cmember *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(cmp_keys + x->koff, cmp_keys + y->koff, n);
    if (c)
        return c;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* ph "C": counter_key/counter_value from the first member of args, in json.loads dict
 * order (a repeated key keeps its first position and its last value), whose value is a
 * JSON number. The args text has already been moved to the blob; it is valid JSON, so it
 * is simply re-read here. Counter events are few. */
static void counter_members(tb_decoder *d, const uint8_t *a, int32_t row)
{
    tb_scanner *s = &d->sc;
    const uint8_t *p = a;
    size_t m = 0, klen_total = 0;
    const uint8_t *k = first_member(s, &p);
    while (k) {
        tb_str key;
        p = tb_scan_string(s, k + 1, &key, true);
        p = expect_colon(s, p);
        d->cmembers = tb_grow(s, d->cmembers, &d->cmembers_cap, m + 1, sizeof *d->cmembers);
        d->ckeys = tb_grow(s, d->ckeys, &d->ckeys_cap, klen_total + key.len + 1, 1);
        memcpy(d->ckeys + klen_total, key.ptr, key.len);
        tb_cmember *cm = &d->cmembers[m];
        cm->koff = klen_total;
        cm->klen = key.len;
        cm->idx = m;
        klen_total += key.len;
        const uint8_t *v = p;
        p = skip_member_value(s, p, 1);
        cm->voff = (size_t)(v - a);
        cm->vlen = (*v == '-' || is_digit(*v)) ? (size_t)(p - v) : 0;
        m++;
        k = next_member(s, &p);
    }
    /* group the members by key; the winner is the group that appears first (its first
     * member's position) among those whose last member is a number */
    if (m == 0)
        return;
    cmp_keys = d->ckeys;
    qsort(d->cmembers, m, sizeof *d->cmembers, cmp_cmember);
    const tb_cmember *best_first = NULL, *best_last = NULL;
    for (size_t i = 0; i < m;) {
        size_t j = i + 1;
        while (j < m && same_key(&d->cmembers[i], &d->cmembers[j], d->ckeys))
            j++;
        const tb_cmember *first = &d->cmembers[i], *last = &d->cmembers[j - 1];
        if (last->vlen && (!best_first || first->idx < best_first->idx)) {
            best_first = first;
            best_last = last;
        }
        i = j;
    }
    double value;
    if (!best_last || !tb_num_to_double(a + best_last->voff, best_last->vlen, &value))
        return;
    int32_t id = intern(d, d->ckeys + best_last->koff, best_last->klen);
    tb_sparse_push(&d->sparse[SP_COUNTER_KEY], s, row, &id);
    tb_sparse_push(&d->sparse[SP_COUNTER_VALUE], s, row, &value);
}

static void counter_event(tb_decoder *d, const tb_row *r, int32_t row)
{
    /* the scanner bounded by the args text (a helper's args are still in place, followed
     * by the rest of the document) */
    tb_scanner *s = &d->sc;
    const uint8_t *end = s->end;
    const uint8_t *a = d->buf + r->args_off;
    s->end = a + r->args_len;
    counter_members(d, a, row);
    s->end = end;
}

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

static void par_guard(tb_decoder *d, const uint8_t *write_end);

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
        par_guard(d, d->buf + d->w + n);
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
        drop_arg_columns(d, row);
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
    p = read_args(d, p, depth + 1, row);
    size_t n = (size_t)(p - a0);
    if (n > INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, a0, "args object larger than 2^31-1 bytes");
    r->args_off = store_args(d, a0, n);
    r->args_len = (int32_t)n;
    return p;
}

static inline bool key_is(const tb_str *k, const char *lit, size_t n)
{
    return k->len == n && memcmp(k->ptr, lit, n) == 0;
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
        counter_event(d, &r, row);
    tb_dense_push(&d->dense, s, &r);
    return p;
}

static bool par_start(tb_decoder *d, const uint8_t *p, int depth);
static void par_finish(tb_decoder *d);
static const uint8_t *par_landed(tb_decoder *d, const uint8_t *p);

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

static const uint8_t *read_events_from(tb_decoder *d, const uint8_t *p, int depth)
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
            const uint8_t *q = par_landed(d, p);
            if (q)
                return q;
        }
    }
}

/* p at the events array's '[' (depth = its nesting depth). */
static const uint8_t *read_events(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    p = tb_skip_ws(p + 1, s->end);
    if (tb_peek(s, p) == ']')
        return p + 1;
    par_start(d, p, depth);
    return read_events_from(d, p, depth);
}

/* ------------------------------------------------------------------ parallel events
 *
 * A big events array is split between threads without knowing where its events start:
 * each helper part starts at a guessed cut (a '{' after "}," in the second half, etc.)
 * and walks on like the main thread until it reaches the next cut or the array's end.
 * A guess is only trusted once the walk before it lands exactly on it at an event
 * boundary: then the events from there are the helper's, decoded in the same state a
 * single pass would have (same depth, the string table merged in first-seen order), so
 * the result is byte for byte that of one pass, and so is the first error. A wrong guess
 * (a cut inside a string or an args object) is never landed on and its part is dropped.
 *
 * Helpers only read the document; their events' args text stays in place until the main
 * thread merges them. The main thread writes the document (args compaction) only below every running
 * part's cut: before a write would reach one, that part is stopped (par_guard). */

#define TB_MAX_PARTS 16
_Static_assert(TB_MAX_PARTS <= TB_PROGRESS_SLOTS, "a progress slot per part");
#define TB_CUT_SEARCH ((size_t)1 << 20) /* bytes searched from a target for a cut */

#ifdef TB_PARALLEL
typedef struct {
    tb_decoder d;         /* first: a helper finds its part from its decoder */
    const uint8_t *start; /* its cut */
    const uint8_t *stop;  /* where its walk ended: a later cut, or just after ']' */
    int depth;            /* the array's depth */
    bool joined, failed;  /* joined: no thread to wait for (never started, or done) */
    atomic_bool quit;     /* set by the main thread: its events are not needed */
    pthread_t th;
} tb_part;

typedef struct tb_par {
    const uint8_t *cuts[TB_MAX_PARTS]; /* cuts[k] = parts[k].start, increasing; cuts[0] unused */
    tb_part parts[TB_MAX_PARTS];
    int n;                             /* parts 1..n-1 are helpers */
    int32_t *map;                      /* scratch: a part's string ids -> the main table's */
} tb_par;

static bool is_ws(uint8_t c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The first '{' at or after from (and before limit) that follows "}" "," (blanks allowed
 * between): where an event would start if that text is between two events. */
static const uint8_t *find_cut(const uint8_t *from, const uint8_t *limit, const uint8_t *lo)
{
    for (const uint8_t *p = from; p < limit; p++) {
        p = memchr(p, ',', (size_t)(limit - p));
        if (!p)
            return NULL;
        const uint8_t *b = p - 1, *f = p + 1;
        while (b > lo && is_ws(*b))
            b--;
        while (f < limit && is_ws(*f))
            f++;
        if (b > lo && *b == '}' && f < limit && *f == '{')
            return f;
    }
    return NULL;
}

/* Cut targets splitting [p, end) into `want` parts of about equal decoding work. Work is
 * estimated from samples: per window, its bytes plus, for each '{' in a sample of it, the
 * cost of an event or args object (measured on Kineto traces: an event costs about as
 * much as 500 bytes of text), so a stretch of many small events (kernels, flows) gets a
 * shorter part than one of few long ones (call stacks, shapes). */
#define TB_SAMPLES 64
#define TB_SAMPLE_BYTES 4096
#define TB_BRACE_COST 250 /* bytes' worth of work per '{' (two per event with args) */

static void work_targets(const uint8_t *p, const uint8_t *end, int want, const uint8_t **targets)
{
    size_t len = (size_t)(end - p), win = len / TB_SAMPLES;
    double work[TB_SAMPLES + 1], total = 0;
    work[0] = 0;
    for (int i = 0; i < TB_SAMPLES; i++) {
        const uint8_t *w0 = p + win * (size_t)i;
        size_t n = win < TB_SAMPLE_BYTES ? win : TB_SAMPLE_BYTES, braces = 0;
        for (size_t j = 0; j < n; j++)
            braces += w0[j] == '{';
        total += (double)win + (double)braces * TB_BRACE_COST * ((double)win / (double)(n ? n : 1));
        work[i + 1] = total;
    }
    for (int k = 1, i = 0; k < want; k++) {
        double goal = total * k / want;
        while (i < TB_SAMPLES && work[i + 1] < goal)
            i++;
        double span = work[i + 1] - work[i], into = span > 0 ? (goal - work[i]) / span : 0;
        targets[k] = p + win * (size_t)i + (size_t)(into * (double)win);
    }
}

static void *part_main(void *arg)
{
    tb_part *pt = arg;
    tb_decoder *d = &pt->d;
    if (setjmp(d->sc.jb)) {
        pt->failed = true;
        return NULL;
    }
    pt->stop = read_events_from(d, pt->start, pt->depth);
    return NULL;
}

static bool par_start(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    size_t left = (size_t)(s->end - p);
    size_t min_part = d->min_part ? d->min_part : 1;
    if (d->is_part || d->par || d->threads <= 1 || left / 2 < min_part)
        return false;
    int want = d->threads < TB_MAX_PARTS ? d->threads : TB_MAX_PARTS;
    if ((size_t)want > left / min_part)
        want = (int)(left / min_part);
    tb_par *par = calloc(1, sizeof *par);
    if (!par)
        return false; /* one pass works without it */
    par->n = 1;
    const uint8_t *targets[TB_MAX_PARTS];
    work_targets(p, s->end, want, targets);
    const uint8_t *last = p;
    for (int k = 1; k < want; k++) {
        const uint8_t *target = targets[k];
        if (target <= last)
            target = last + 1;
        const uint8_t *limit = (size_t)(s->end - target) > TB_CUT_SEARCH ? target + TB_CUT_SEARCH : s->end;
        const uint8_t *cut = target < s->end ? find_cut(target, limit, p) : NULL;
        if (cut && cut > last)
            par->cuts[par->n++] = last = cut;
    }
    if (par->n < 2) {
        free(par);
        return false;
    }
    d->par = par;
    d->next_cut = 1;
    for (int k = 1; k < par->n; k++) {
        tb_part *pt = &par->parts[k];
        tb_decoder *h = &pt->d;
        h->buf = d->buf;
        h->sc.base = s->base;
        h->sc.end = s->end;
        for (int c = 0; c < TB_NSPARSE; c++)
            h->sparse[c].itemsize = tb_sparse_specs[c].itemsize;
        h->is_part = true;
        h->keep_input = d->keep_input;
        h->progress = d->progress;
        h->slot = k;
        h->par = par;
        h->next_cut = k + 1;
        h->landed = -1;
        pt->start = par->cuts[k];
        pt->depth = depth;
        atomic_init(&pt->quit, false);
        pt->joined = true;
    }
    for (int k = 1; k < par->n; k++) {
        tb_part *pt = &par->parts[k];
        if (pthread_create(&pt->th, NULL, part_main, pt) != 0) {
            par_finish(d); /* no thread to spare: one pass */
            return false;
        }
        pt->joined = false;
    }
    return true;
}

static void part_join(tb_part *pt)
{
    if (!pt->joined) {
        pthread_join(pt->th, NULL);
        pt->joined = true;
    }
}

/* Stops and joins every running part whose cut is below write_end: the main thread is
 * about to write there, and their events are not needed (the main walk passed them). */
static void par_guard(tb_decoder *d, const uint8_t *write_end)
{
    tb_par *par = d->par;
    for (int k = 1; k < par->n && par->cuts[k] < write_end; k++) {
        atomic_store(&par->parts[k].quit, true);
        part_join(&par->parts[k]);
    }
}

/* Joins and frees every part (after the array, and on any error). */
static void par_finish(tb_decoder *d)
{
    tb_par *par = d->par;
    if (!par)
        return;
    for (int k = 1; k < par->n; k++)
        atomic_store(&par->parts[k].quit, true);
    for (int k = 1; k < par->n; k++) {
        part_join(&par->parts[k]);
        tb_decoder_free(&par->parts[k].d);
    }
    free(par->map);
    free(par);
    d->par = NULL;
}

static void move_args(tb_decoder *d, const tb_dense *H, size_t n0);

static inline int32_t remap(const int32_t *map, int32_t id)
{
    return id >= 0 ? map[id] : id;
}

/* Appends part pt's events to the main decoder d: string ids through the merged table,
 * rows after d's, args texts moved to d's blob. */
static void merge_part(tb_decoder *d, tb_part *pt)
{
    tb_scanner *s = &d->sc;
    tb_decoder *h = &pt->d;
    tb_par *par = d->par;
    size_t n0 = d->dense.n, nh = h->dense.n;
    if (n0 + nh > INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, pt->start, "more than 2^31-1 events");
    free(par->map);
    par->map = malloc((h->strings.n ? h->strings.n : 1) * sizeof *par->map);
    if (!par->map)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    for (size_t i = 0; i < h->strings.n; i++) {
        size_t len;
        int ascii;
        const uint8_t *b = tb_intern_bytes(&h->strings, i, &len, &ascii);
        par->map[i] = tb_intern_get(&d->strings, s, b, len);
    }
    const int32_t *map = par->map;
    tb_dense_reserve(&d->dense, s, n0 + nh);
    tb_dense *D = &d->dense, *H = &h->dense;
    for (size_t i = 0; i < nh; i++) {
        D->ph[n0 + i] = H->ph[i];
        D->cat[n0 + i] = remap(map, H->cat[i]);
        D->name[n0 + i] = remap(map, H->name[i]);
        D->pid_str[n0 + i] = remap(map, H->pid_str[i]);
        D->tid_str[n0 + i] = remap(map, H->tid_str[i]);
        D->pid[n0 + i] = H->pid[i];
        D->tid[n0 + i] = H->tid[i];
        D->ts[n0 + i] = H->ts[i];
        D->dur[n0 + i] = H->dur[i];
        D->args_len[n0 + i] = H->args_len[i];
    }
    D->n = n0 + nh;
    for (int c = 0; c < TB_NSPARSE; c++) {
        tb_sparse *dc = &d->sparse[c], *hc = &h->sparse[c];
        if (!hc->n)
            continue;
        tb_sparse_reserve(dc, s, dc->n + hc->n);
        for (size_t i = 0; i < hc->n; i++)
            dc->rows[dc->n + i] = hc->rows[i] + (int32_t)n0;
        if (tb_sparse_specs[c].string_id) {
            int32_t *out = (int32_t *)(void *)dc->vals + dc->n;
            const int32_t *in = (const int32_t *)(void *)hc->vals;
            for (size_t i = 0; i < hc->n; i++)
                out[i] = remap(map, in[i]);
        } else {
            memcpy(dc->vals + dc->n * dc->itemsize, hc->vals, hc->n * hc->itemsize);
        }
        dc->n += hc->n;
    }
    move_args(d, H, n0);
}

/* The compaction a single pass would have done for a helper's events (merged at rows
 * n0...): each args text, still where the helper read it, moves down to the blob's end.
 * The texts come in document order and the blob's end stays at or below each one, so
 * every move is to a lower address and overwrites only text already moved or skipped. */
static void move_args(tb_decoder *d, const tb_dense *H, size_t n0)
{
    if (d->keep_input) { /* the texts stay where they are: so do their offsets */
        memcpy(d->dense.args_off + n0, H->args_off, H->n * sizeof *H->args_off);
        return;
    }
    size_t last = 0; /* the end of the helper's last args text: no write reaches past it */
    for (size_t i = H->n; i-- > 0;)
        if (H->args_len[i]) {
            last = (size_t)H->args_off[i] + (size_t)H->args_len[i];
            break;
        }
    if (last)
        par_guard(d, d->buf + last);
    for (size_t i = 0; i < H->n; i++) {
        size_t len = (size_t)H->args_len[i];
        d->dense.args_off[n0 + i] = (int64_t)d->w;
        if (len) {
            memmove(d->buf + d->w, d->buf + H->args_off[i], len);
            d->w += len;
        }
    }
}

/* Called by a walk at each event start p after the first: when p is the next cut, a
 * helper stops (returns p) and the main thread merges that part, and the ones it led to
 * (returns where the last of them stopped: after the array's ']'). NULL: walk on. */
static const uint8_t *par_landed(tb_decoder *d, const uint8_t *p)
{
    tb_par *par = d->par;
    while (d->next_cut < par->n && par->cuts[d->next_cut] < p)
        d->next_cut++; /* passed: that guess was inside an event */
    if (d->is_part && atomic_load_explicit(&((tb_part *)(void *)d)->quit, memory_order_relaxed))
        tb_fail_kind(&d->sc, TB_ERR_LIMIT, p, "parallel part no longer needed");
    if (d->next_cut >= par->n || par->cuts[d->next_cut] != p)
        return NULL;
    if (d->is_part) {
        d->landed = d->next_cut;
        return p;
    }
    for (int k = d->next_cut;;) {
        tb_part *pt = &par->parts[k];
        part_join(pt);
        if (pt->failed) {
            if (atomic_load(&pt->quit)) /* cannot happen: a part in the chain is never stopped */
                tb_fail_kind(&d->sc, TB_ERR_LIMIT, pt->start, "internal error in parallel decoding");
            d->sc.err_kind = pt->d.sc.err_kind; /* the error a single pass would have met first */
            d->sc.err_msg = pt->d.sc.err_msg;
            d->sc.err_off = pt->d.sc.err_off;
            longjmp(d->sc.jb, 1);
        }
        merge_part(d, pt);
        tb_decoder_free(&pt->d); /* its columns now live in d: give them back now */
        if (pt->d.landed < 0)
            return pt->stop;
        k = pt->d.landed;
    }
}
#else
static bool par_start(tb_decoder *d, const uint8_t *p, int depth)
{
    (void)d, (void)p, (void)depth;
    return false;
}
static void par_guard(tb_decoder *d, const uint8_t *write_end)
{
    (void)d, (void)write_end;
}
static void par_finish(tb_decoder *d)
{
    (void)d;
}
static const uint8_t *par_landed(tb_decoder *d, const uint8_t *p)
{
    (void)d, (void)p;
    return NULL;
}
#endif

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
            par_finish(d);
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
        par_finish(d);
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
        par_finish(d);
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
