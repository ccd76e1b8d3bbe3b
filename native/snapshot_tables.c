/* See snapshot_tables.h. */
#include "snapshot_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const HISTORY_COLS[][2] = {
    {"device", "i"}, {"action", "b"}, {"action_text", "i"}, {"addr", "q"}, {"size", "q"}, {"stream", "q"},
    {"time_us", "q"}, {"stack", "i"}, {"device_free", "q"}, {"compile_context", "i"}, {"user_metadata", "i"}};
static const char *const SEGMENT_COLS[][2] = {
    {"device", "i"}, {"address", "q"}, {"total_size", "q"}, {"allocated_size", "q"}, {"active_size", "q"},
    {"requested_size", "q"}, {"stream", "q"}, {"segment_type", "i"}, {"pool_a", "q"}, {"pool_b", "q"},
    {"is_expandable", "b"}, {"stack", "i"}, {"block_start", "q"}, {"block_count", "i"}};
static const char *const BLOCK_COLS[][2] = {
    {"segment", "i"}, {"offset", "q"}, {"size", "q"}, {"requested_size", "q"}, {"state", "b"},
    {"state_text", "i"}, {"stack", "i"}};
static const char *const FRAME_COLS[][2] = {{"filename", "i"}, {"line", "q"}, {"name", "i"}};

static void table_init(sn_table *t, const char *name, const char *const (*cols)[2], int n)
{
    t->name = name;
    t->ncols = n;
    t->n = 0;
    for (int i = 0; i < n; i++) {
        sn_col *c = &t->cols[i];
        c->name = cols[i][0];
        c->format = cols[i][1][0];
        c->itemsize = c->format == 'q' ? 8 : c->format == 'i' ? 4 : 1;
        c->data = NULL;
        c->n = c->cap = 0;
    }
}

void sn_out_init(sn_out *o, sigjmp_buf *jb, char *errmsg)
{
    memset(o, 0, sizeof *o);
    o->jb = jb;
    o->errmsg = errmsg;
    table_init(&o->t[SN_HISTORY], "history", HISTORY_COLS, 11);
    table_init(&o->t[SN_SEGMENTS], "segments", SEGMENT_COLS, 14);
    table_init(&o->t[SN_BLOCKS], "blocks", BLOCK_COLS, 7);
    table_init(&o->t[SN_FRAMES], "frames", FRAME_COLS, 3);
}

void sn_out_free(sn_out *o)
{
    for (int t = 0; t < SN_NTABLES; t++)
        for (int i = 0; i < o->t[t].ncols; i++)
            free(o->t[t].cols[i].data);
    free(o->arena);
    free(o->str_off);
    free(o->str_len);
    free(o->str_set.slots);
    free(o->str_set.hashes);
    free(o->frame_set.slots);
    free(o->frame_set.hashes);
    free(o->stack_set.slots);
    free(o->stack_set.hashes);
    free(o->stack_off);
    free(o->stack_frames);
    memset(o, 0, sizeof *o);
}

void *sn_grow(sn_out *o, void *p, size_t *cap, size_t need, size_t itemsize)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c += c / 2 + 16;
    void *q = realloc(p, c * itemsize);
    if (!q) {
        snprintf(o->errmsg, 200, "out of memory (%zu bytes)", c * itemsize);
        siglongjmp(*o->jb, 2);
    }
    *cap = c;
    return q;
}

static inline uint8_t *cell(sn_out *o, int table, int col)
{
    sn_col *c = &o->t[table].cols[col];
    size_t row = o->t[table].n;
    c->data = sn_grow(o, c->data, &c->cap, row + 1, c->itemsize);
    c->n = row + 1;
    return c->data + row * c->itemsize;
}

void sn_push_i64(sn_out *o, int table, int col, int64_t v) { memcpy(cell(o, table, col), &v, 8); }
void sn_push_i32(sn_out *o, int table, int col, int32_t v) { memcpy(cell(o, table, col), &v, 4); }
void sn_push_i8(sn_out *o, int table, int col, int8_t v) { memcpy(cell(o, table, col), &v, 1); }

/* ---------------------------------------------------------------- hash sets */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ mix(w)) * 0x100000001b3ULL;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    return mix(h ^ w);
}

/* kind: 0 strings, 1 frames, 2 stacks */
static int same(sn_out *o, int kind, uint32_t id, const void *key, size_t n)
{
    if (kind == 0)
        return o->str_len[id] == n && memcmp(o->arena + o->str_off[id], key, n) == 0;
    if (kind == 1) {
        const int64_t *k = key;
        int32_t *fn = (int32_t *)o->t[SN_FRAMES].cols[0].data, *nm = (int32_t *)o->t[SN_FRAMES].cols[2].data;
        int64_t line;
        memcpy(&line, o->t[SN_FRAMES].cols[1].data + 8 * (size_t)id, 8);
        return fn[id] == (int32_t)k[0] && line == k[1] && nm[id] == (int32_t)k[2];
    }
    size_t a = (size_t)o->stack_off[id], b = (size_t)o->stack_off[id + 1];
    return b - a == n && memcmp(o->stack_frames + a, key, n * sizeof(int32_t)) == 0;
}

static void set_grow(sn_out *o, sn_set *s)
{
    size_t cap = s->mask ? (s->mask + 1) * 2 : 1024;
    uint32_t *slots = calloc(cap, sizeof *slots), *hashes = calloc(cap, sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        snprintf(o->errmsg, 200, "out of memory (hash table of %zu)", cap);
        siglongjmp(*o->jb, 2);
    }
    for (size_t i = 0; s->mask && i <= s->mask; i++) {
        if (!s->slots[i])
            continue;
        size_t j = s->hashes[i] & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = s->slots[i];
        hashes[j] = s->hashes[i];
    }
    free(s->slots);
    free(s->hashes);
    s->slots = slots;
    s->hashes = hashes;
    s->mask = cap - 1;
}

/* the slot index where key lives or would go; *found = its id or -1 */
static size_t set_find(sn_out *o, sn_set *s, int kind, uint32_t h, const void *key, size_t n, int64_t *found)
{
    if ((s->count + 1) * 4 > (s->mask + 1) * 3 || !s->mask)
        set_grow(o, s);
    size_t j = h & s->mask;
    while (s->slots[j]) {
        if (s->hashes[j] == h && same(o, kind, s->slots[j] - 1, key, n)) {
            *found = s->slots[j] - 1;
            return j;
        }
        j = (j + 1) & s->mask;
    }
    *found = -1;
    return j;
}

static void set_put(sn_set *s, size_t j, uint32_t h, size_t id)
{
    s->slots[j] = (uint32_t)id + 1;
    s->hashes[j] = h;
    s->count++;
}

int32_t sn_intern(sn_out *o, const uint8_t *p, size_t len)
{
    uint32_t h = (uint32_t)hash_bytes(p, len);
    int64_t found;
    size_t j = set_find(o, &o->str_set, 0, h, p, len, &found);
    if (found >= 0)
        return (int32_t)found;
    if (o->nstr >= INT32_MAX - 1) {
        snprintf(o->errmsg, 200, "too many distinct strings");
        siglongjmp(*o->jb, 2);
    }
    o->arena = sn_grow(o, o->arena, &o->arena_cap, o->arena_len + len + 1, 1);
    memcpy(o->arena + o->arena_len, p, len);
    size_t cap = o->str_cap;
    o->str_off = sn_grow(o, o->str_off, &cap, o->nstr + 1, 8);
    cap = o->str_cap;
    o->str_len = sn_grow(o, o->str_len, &cap, o->nstr + 1, 8);
    o->str_cap = cap;
    o->str_off[o->nstr] = o->arena_len;
    o->str_len[o->nstr] = len;
    o->arena_len += len;
    set_put(&o->str_set, j, h, o->nstr);
    return (int32_t)o->nstr++;
}

int32_t sn_frame(sn_out *o, int32_t filename, int64_t line, int32_t name)
{
    int64_t key[3] = {filename, line, name};
    uint32_t h = (uint32_t)mix((uint64_t)(uint32_t)filename * 0x9E3779B97F4A7C15ULL ^ mix((uint64_t)line) ^
                               ((uint64_t)(uint32_t)name << 29));
    int64_t found;
    size_t j = set_find(o, &o->frame_set, 1, h, key, 3, &found);
    if (found >= 0)
        return (int32_t)found;
    size_t id = o->t[SN_FRAMES].n;
    sn_push_i32(o, SN_FRAMES, 0, filename);
    sn_push_i64(o, SN_FRAMES, 1, line);
    sn_push_i32(o, SN_FRAMES, 2, name);
    sn_row_end(o, SN_FRAMES);
    set_put(&o->frame_set, j, h, id);
    return (int32_t)id;
}

int32_t sn_stack(sn_out *o, const int32_t *frames, size_t n)
{
    if (n == 0)
        return -1;
    if (!o->stack_off) {
        o->stack_off = sn_grow(o, NULL, &o->stack_cap, 1, 8);
        o->stack_off[0] = 0;
    }
    uint32_t h = (uint32_t)hash_bytes((const uint8_t *)frames, n * sizeof(int32_t));
    int64_t found;
    size_t j = set_find(o, &o->stack_set, 2, h, frames, n, &found);
    if (found >= 0)
        return (int32_t)found;
    o->stack_frames = sn_grow(o, o->stack_frames, &o->sf_cap, o->nsf + n, sizeof(int32_t));
    memcpy(o->stack_frames + o->nsf, frames, n * sizeof(int32_t));
    o->nsf += n;
    o->stack_off = sn_grow(o, o->stack_off, &o->stack_cap, o->nstack + 2, 8);
    o->stack_off[++o->nstack] = (int64_t)o->nsf;
    set_put(&o->stack_set, j, h, o->nstack - 1);
    return (int32_t)(o->nstack - 1);
}
