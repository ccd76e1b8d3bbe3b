/* An event's args, for the trace walk (decoder.c): the members the schema extracts
 * (tb_profiler/decode/schema.py) into sparse columns, found through a small hash table of
 * their keys, and a counter event's key and value; and the column tables themselves.
 * Every other member of args is only validated (tb_skip_value). */
#include <stdlib.h>
#include <string.h>

#include "decoder_walk.h"

/* ------------------------------------------------------------------ column tables */

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

/* ------------------------------------------------------------------ args */

void tb_drop_arg_columns(tb_decoder *d, int32_t row)
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

/* p at the args object's '{' (depth = its nesting depth). Returns the byte after '}'. */
const uint8_t *tb_read_args(tb_decoder *d, const uint8_t *p, int depth, int32_t row)
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

void tb_counter_event(tb_decoder *d, const tb_row *r, int32_t row)
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
