/* The trace walk; see decoder.h and tb_profiler/decode/schema.py for what each field
 * becomes. The walker knows the shape of a trace (top object or bare array, the events
 * array, each event, its args) and hands every other value to tb_skip_value, which
 * validates it without building anything. */
#include "decoder.h"

#include <stdlib.h>
#include <string.h>

#include "numbers.h"

/* ------------------------------------------------------------------ column tables */

enum {
    SP_FLOW_ID = 0,
    SP_FLOW_BP = 1,
    SP_COUNTER_KEY = TB_NSPARSE - 2,
    SP_COUNTER_VALUE = TB_NSPARSE - 1,
};

const tb_colspec tb_sparse_specs[TB_NSPARSE] = {
    {"flow_id", 'q', 8}, {"flow_bp", 'B', 1},
    /* ARG_INT */
    {"external_id", 'q', 8}, {"correlation", 'q', 8}, {"seq_num", 'q', 8}, {"fwd_tid", 'q', 8},
    {"record_function_id", 'q', 8}, {"ev_idx", 'q', 8}, {"python_id", 'q', 8},
    {"python_parent_id", 'q', 8}, {"python_module_id", 'q', 8}, {"python_tid", 'q', 8},
    {"device", 'q', 8}, {"stream", 'q', 8}, {"context", 'q', 8}, {"registers", 'q', 8},
    {"shared_memory", 'q', 8}, {"queued", 'q', 8}, {"copy_bytes", 'q', 8}, {"mem_bytes", 'q', 8},
    {"addr", 'q', 8}, {"total_allocated", 'q', 8}, {"total_reserved", 'q', 8},
    {"device_type", 'q', 8}, {"device_id", 'q', 8}, {"in_msg_nelems", 'q', 8},
    {"out_msg_nelems", 'q', 8}, {"group_size", 'q', 8}, {"rank", 'q', 8}, {"sort_index", 'q', 8},
    /* ARG_FLOAT */
    {"blocks_per_sm", 'd', 8}, {"warps_per_sm", 'd', 8}, {"occupancy", 'd', 8}, {"bandwidth", 'd', 8},
    /* ARG_DIM3 */
    {"grid_x", 'i', 4}, {"grid_y", 'i', 4}, {"grid_z", 'i', 4},
    {"block_x", 'i', 4}, {"block_y", 'i', 4}, {"block_z", 'i', 4},
    /* ARG_TEXT */
    {"call_stack", 'i', 4}, {"collective_name", 'i', 4}, {"dtype", 'i', 4}, {"pg_name", 'i', 4},
    {"pg_desc", 'i', 4}, {"arg_name", 'i', 4},
    /* ARG_JSON */
    {"input_dims", 'i', 4}, {"input_type", 'i', 4}, {"input_strides", 'i', 4},
    {"concrete_inputs", 'i', 4}, {"pg_ranks", 'i', 4},
    /* COUNTER */
    {"counter_key", 'i', 4}, {"counter_value", 'd', 8},
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
    {"sort_index", "sort_index", ARG_INT, 0, 0},
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
static void counter_event(tb_decoder *d, const tb_row *r, int32_t row)
{
    tb_scanner *s = &d->sc;
    const uint8_t *a = d->buf + r->args_off, *p = a;
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
    /* compaction: all of this text has been read, and the write pointer trails it */
    memmove(d->buf + d->w, a0, n);
    d->w += n;
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

/* p at the events array's '[' (depth = its nesting depth). */
static const uint8_t *read_events(tb_decoder *d, const uint8_t *p, int depth)
{
    tb_scanner *s = &d->sc;
    p = tb_skip_ws(p + 1, s->end);
    if (tb_peek(s, p) == ']')
        return p + 1;
    for (;;) {
        if (tb_peek(s, p) != '{')
            tb_fail(s, p, "an event is not a JSON object");
        p = read_event(d, p, depth + 1);
        p = tb_skip_ws(p, s->end);
        uint8_t c = tb_peek(s, p);
        if (c == ',')
            p = tb_skip_ws(p + 1, s->end);
        else if (c == ']')
            return p + 1;
        else
            tb_fail(s, p, "expected ',' or ']'");
    }
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
    if (setjmp(s->jb))
        return -1;
    const uint8_t *p = buf;
    if (len >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF)
        p += 3; /* UTF-8 byte order mark */
    p = tb_skip_ws(p, s->end);
    if (p >= s->end)
        tb_fail_kind(s, TB_ERR_FORMAT, p, "empty trace (no JSON value)");
    if (*p == '[') {
        p = read_events(d, p, 1);
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
