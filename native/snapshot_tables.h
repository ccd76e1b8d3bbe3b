/* The memory-snapshot reader's output side: growable columns in the order of
 * tb_profiler/decode/snapshot_schema.py, the string table, the frame table and the CSR
 * stacks, each deduplicated with an open-addressing hash set. Plain C, no Python. */
#ifndef TB_SNAPSHOT_TABLES_H
#define TB_SNAPSHOT_TABLES_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#define TB_SN_MISSING INT64_MIN

/* a growable column of fixed-size items */
typedef struct {
    const char *name;
    char format; /* struct letter: q int64, i int32, b int8 */
    size_t itemsize;
    uint8_t *data;
    size_t n, cap;
} sn_col;

enum { SN_HISTORY, SN_SEGMENTS, SN_BLOCKS, SN_FRAMES, SN_NTABLES };
#define SN_MAXCOLS 14

typedef struct {
    const char *name;
    int ncols;
    sn_col cols[SN_MAXCOLS];
    size_t n; /* rows */
} sn_table;

/* a set of ids keyed by a 64-bit hash; slots hold id + 1 (0: empty) */
typedef struct {
    uint32_t *slots;
    uint32_t *hashes;
    size_t mask, count;
} sn_set;

typedef struct {
    sigjmp_buf *jb;       /* out of memory jumps here (errmsg set) */
    char *errmsg;         /* 200 bytes */
    sn_table t[SN_NTABLES];
    /* strings: bytes in arena, (offset, length) per id */
    uint8_t *arena;
    size_t arena_len, arena_cap;
    uint64_t *str_off, *str_len;
    size_t nstr, str_cap;
    sn_set str_set, frame_set, stack_set;
    /* stacks: CSR */
    int64_t *stack_off;
    int32_t *stack_frames;
    size_t nstack, stack_cap, nsf, sf_cap;
} sn_out;

void sn_out_init(sn_out *o, sigjmp_buf *jb, char *errmsg);
void sn_out_free(sn_out *o);
void *sn_grow(sn_out *o, void *p, size_t *cap, size_t need, size_t itemsize);
/* a new row's cell pointer (the row is appended to every column by sn_row_end) */
void sn_push_i64(sn_out *o, int table, int col, int64_t v);
void sn_push_i32(sn_out *o, int table, int col, int32_t v);
void sn_push_i8(sn_out *o, int table, int col, int8_t v);
static inline void sn_row_end(sn_out *o, int table) { o->t[table].n++; }
int32_t sn_intern(sn_out *o, const uint8_t *p, size_t len);
int32_t sn_frame(sn_out *o, int32_t filename, int64_t line, int32_t name);
int32_t sn_stack(sn_out *o, const int32_t *frames, size_t n);

#endif
