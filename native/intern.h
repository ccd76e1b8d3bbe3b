/* The string table: every distinct string interned once, ids are indexes.
 *
 * Bytes are copied into an arena when first seen (the document buffer is overwritten by
 * args compaction, so nothing may point into it), and looked up with open addressing on
 * a 64-bit hash. Each slot packs 32 bits of hash with the id, so a probe rarely touches
 * the arena unless it is a real hit. */
#ifndef TB_INTERN_H
#define TB_INTERN_H

#include <stdint.h>

#include "json_scan.h"

typedef struct {
    uint64_t off;  /* into arena */
    uint64_t len;  /* bytes; bit 63 set when the string is pure ASCII */
    uint64_t hash;
} tb_istr;

#define TB_ISTR_ASCII ((uint64_t)1 << 63)

/* The most bytes a string keeps (tb_profiler.decode.STRING_MAX): a longer one is interned
 * as its first bytes (cut at a UTF-8 character boundary) followed by
 * " [... cut: first K of N bytes]", so that a trace's string table is bounded by this
 * many bytes per distinct string whatever the file holds (one 500 MB event name costs
 * 1 MiB, and every view shows the full length).  Two strings that agree on what is kept
 * and on their full length are one string. */
#define TB_STRING_MAX ((size_t)1 << 20)
#define TB_CUT_TAIL_MAX 64 /* room left for the tail, which is shorter */

typedef struct {
    uint8_t *arena;
    size_t arena_len, arena_cap;
    tb_istr *strs;
    size_t n, strs_cap;
    uint64_t *slots; /* (hash >> 32) << 32 | (id + 1); 0 = empty */
    size_t mask;
    uint8_t *cut; /* a cut string is built here before it is interned */
    size_t cut_cap;
} tb_intern;

/* The id of the string [p, p+len) (valid UTF-8), interning it when new; a string longer
 * than TB_STRING_MAX is interned cut (see above). */
int32_t tb_intern_get(tb_intern *t, tb_scanner *s, const uint8_t *p, size_t len);

static inline const uint8_t *tb_intern_bytes(const tb_intern *t, size_t id, size_t *len, int *ascii)
{
    *len = (size_t)(t->strs[id].len & ~TB_ISTR_ASCII);
    *ascii = (t->strs[id].len & TB_ISTR_ASCII) != 0;
    return t->arena + t->strs[id].off;
}

void tb_intern_free(tb_intern *t);

#endif
