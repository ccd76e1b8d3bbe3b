/* String interning; see intern.h. */
#include "intern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t load32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 64x64 -> 128 multiply folded to 64 bits (the wyhash mixing step). */
static inline uint64_t mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

#define K0 0xa0761d6478bd642fULL
#define K1 0xe7037ed1a0b428dbULL
#define K2 0x8ebc6af09c88c6e3ULL

/* A wyhash-style hash: two independent lanes over 16-byte blocks, overlapping loads for
 * the tail so that no byte outside [p, p+n) is read. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t a = K0 ^ n, b = K1;
    size_t i = n;
    while (i > 16) {
        a = mum(a ^ load64(p), K1);
        b = mum(b ^ load64(p + 8), K2);
        p += 16;
        i -= 16;
    }
    uint64_t x, y;
    if (i >= 8) {
        x = load64(p);
        y = load64(p + i - 8);
    } else if (i >= 4) {
        x = load32(p);
        y = load32(p + i - 4);
    } else if (i > 0) {
        x = ((uint64_t)p[0] << 16) | ((uint64_t)p[i >> 1] << 8) | p[i - 1];
        y = 0;
    } else {
        x = y = 0;
    }
    return mum(mum(a ^ x, K1 ^ b) ^ y, K2 ^ n);
}

static bool all_ascii(const uint8_t *p, size_t n)
{
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc |= load64(p + i);
    for (; i < n; i++)
        acc |= p[i];
    return (acc & 0x8080808080808080ULL) == 0;
}

static void rehash(tb_intern *t, tb_scanner *s)
{
    size_t ncap = t->slots ? (t->mask + 1) * 2 : 1024;
    uint64_t *slots = calloc(ncap, sizeof *slots);
    if (!slots)
        tb_fail_kind(s, TB_ERR_NOMEM, NULL, "out of memory");
    size_t mask = ncap - 1;
    for (size_t id = 0; id < t->n; id++) {
        uint64_t h = t->strs[id].hash;
        size_t i = h & mask;
        while (slots[i])
            i = (i + 1) & mask;
        slots[i] = (h & 0xFFFFFFFF00000000ULL) | (id + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->mask = mask;
}

/* The cut form of a string longer than TB_STRING_MAX (see intern.h), interned. */
static int32_t intern_cut(tb_intern *t, tb_scanner *s, const uint8_t *p, size_t len)
{
    size_t keep = TB_STRING_MAX - TB_CUT_TAIL_MAX;
    while (keep > 0 && (p[keep] & 0xC0) == 0x80) /* p[keep] is the first byte left out */
        keep--;
    char tail[TB_CUT_TAIL_MAX];
    int m = snprintf(tail, sizeof tail, " [... cut: first %zu of %zu bytes]", keep, len);
    if (m < 0 || (size_t)m >= sizeof tail)
        tb_fail_kind(s, TB_ERR_LIMIT, NULL, "a string too long to describe");
    t->cut = tb_grow(s, t->cut, &t->cut_cap, keep + (size_t)m, 1);
    memcpy(t->cut, p, keep);
    memcpy(t->cut + keep, tail, (size_t)m);
    return tb_intern_get(t, s, t->cut, keep + (size_t)m); /* <= TB_STRING_MAX: not cut again */
}

int32_t tb_intern_get(tb_intern *t, tb_scanner *s, const uint8_t *p, size_t len)
{
    if (len > TB_STRING_MAX)
        return intern_cut(t, s, p, len);
    if (!t->slots)
        rehash(t, s);
    uint64_t h = hash_bytes(p, len);
    uint64_t tag = h & 0xFFFFFFFF00000000ULL;
    size_t i = h & t->mask;
    for (;;) {
        uint64_t slot = t->slots[i];
        if (!slot)
            break;
        if ((slot & 0xFFFFFFFF00000000ULL) == tag) {
            size_t id = (uint32_t)slot - 1;
            const tb_istr *e = &t->strs[id];
            if ((e->len & ~TB_ISTR_ASCII) == len && memcmp(t->arena + e->off, p, len) == 0)
                return (int32_t)id;
        }
        i = (i + 1) & t->mask;
    }
    /* new string */
    if (t->n >= INT32_MAX)
        tb_fail_kind(s, TB_ERR_LIMIT, NULL, "more than 2^31-1 distinct strings");
    t->arena = tb_grow(s, t->arena, &t->arena_cap, t->arena_len + len + 1, 1); /* +1: never NULL */
    t->strs = tb_grow(s, t->strs, &t->strs_cap, t->n + 1, sizeof *t->strs);
    memcpy(t->arena + t->arena_len, p, len);
    size_t id = t->n++;
    t->strs[id].off = t->arena_len;
    t->strs[id].len = len | (all_ascii(p, len) ? TB_ISTR_ASCII : 0);
    t->strs[id].hash = h;
    t->arena_len += len;
    t->slots[i] = tag | (id + 1);
    if (t->n * 2 > t->mask + 1)
        rehash(t, s);
    return (int32_t)id;
}

void tb_intern_free(tb_intern *t)
{
    free(t->arena);
    free(t->strs);
    free(t->slots);
    free(t->cut);
    memset(t, 0, sizeof *t);
}
