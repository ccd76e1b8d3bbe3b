/* The streaming memory-snapshot reader's shared state (snapshot.c says how the reader works):
 * the value stack's slots, the memo, the reader, and the small helpers every part inlines.
 * The parts: snapshot.c (the opcode loop, the Python entry point), snapshot_roles.c (input
 * checks, the stack's MARKs, the role guess), snapshot_attach.c (values put in dicts and lists:
 * the schema's fields and rows), snapshot_memo.c (PUT / GET). Output: snapshot_tables.c. */
#ifndef TB_SNAPSHOT_READER_H
#define TB_SNAPSHOT_READER_H

#include "snapshot.h" /* Python.h first: it sets the feature macros */

#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include "snapshot_tables.h"


#define MISSING TB_SN_MISSING
#define EXTRA_LIMIT 10000 /* snapshot_schema.EXTRA_LIMIT */
#define BATCH 1000        /* pickle's batch size for SETITEMS / APPENDS */

enum { T_NONE, T_BOOL, T_INT, T_FLOAT, T_STR, T_BYTES, T_TUPLE, T_DICT, T_LIST, T_MARK };
enum { R_NONE, R_IGNORE, R_EXTRA, R_TOP, R_SEGLIST, R_SEG, R_BLOCKLIST, R_BLOCK, R_DTLIST, R_ENTRYLIST, R_ENTRY,
       R_FRAMELIST, R_FRAME };
enum { E_ERROR = 1, E_OOM = 2, E_UNSUPPORTED = 3 };

/* the keys the schema reads */
enum { K_NONE, K_SEGMENTS, K_DEVICE_TRACES, K_ALLOCATOR_SETTINGS, K_EXTERNAL_ANNOTATIONS, K_DEVICE, K_ADDRESS,
       K_TOTAL_SIZE, K_ALLOCATED_SIZE, K_ACTIVE_SIZE, K_REQUESTED_SIZE, K_STREAM, K_SEGMENT_TYPE,
       K_SEGMENT_POOL_ID, K_IS_EXPANDABLE, K_FRAMES, K_BLOCKS, K_SIZE, K_STATE, K_ACTION, K_ADDR, K_TIME_US,
       K_DEVICE_FREE, K_COMPILE_CONTEXT, K_USER_METADATA, K_FILENAME, K_LINE, K_NAME, K_COUNT };
extern const char *const SR_KEYS[K_COUNT];

/* slot flags */
#define F_FITS 1     /* T_INT: the value is in [-2**63, 2**64) (held as int64) */
#define F_UNSIGNED 2 /* T_INT: the value is >= 2**63 (the int64 is its bit pattern) */
#define F_HASHABLE 4 /* T_TUPLE: every item is hashable */
#define F_PAIR 8     /* T_TUPLE: two items (v[0], v[1] = as_i64 of each) */
#define F_EXACT 16   /* T_TUPLE: empty, or two signed int64 items (rebuildable) */
#define F_FINAL 32   /* memo of a container: its frame / stack id / object index is known */
#define F_ALIASED 64 /* memo of a container: a GET / DUP took it */
#define F_OPEN 128   /* memo of a container still being read (its value: the container's stack index) */

typedef struct {
    uint8_t type, role, alias, key, flags;
    uint8_t hdr;     /* T_STR / T_BYTES / big T_INT: 0: 1-byte, 1: 4-byte, 2: 8-byte length; 3: INT text */
    int32_t sid;     /* T_STR: string id (-2: not interned yet); FRAME / FRAMELIST: frame / stack id; alias: its id */
    int64_t memo;    /* container: its memo index (-1 none; drop() closes that entry) */
    size_t off, len; /* T_STR / T_BYTES: payload; T_INT without F_FITS: opcode offset */
    int64_t i;       /* T_INT / T_BOOL value; T_FLOAT bits */
    PyObject *obj;   /* R_EXTRA container (owned) */
    int64_t v[14];   /* a schema dict's fields (schema column order); T_TUPLE pair */
    int64_t n, start, acc, parent; /* lists: items, first row / scratch, offset sum, seg row / device */
} slot;

/* A memo entry: 8 bytes (GETs jump around the memo: the smaller, the fewer cache misses).
 * Bits 0-3: the type (T_*, ME_BIGINT, ME_EMPTY). T_STR, T_BYTES and ME_BIGINT (an int beyond
 * 64 bits: its opcode's payload): bits 4-5 the length header (slot.hdr), 6-10 the key, 11-63
 * the payload's offset. Other types: bits 4-7 the role, 8-15 the slot flags, bit 16 ME_WIDE
 * (the value indexes reader.wide: an int beyond 32 bits, a float), 32-63 a 32-bit value: an
 * int or bool; a pair tuple's index in reader.pairs (-1 none); a container's stack index
 * while it is open (F_OPEN: its frame / stack id is in its slot), then its frame / stack id,
 * or an extras object's index in reader.objs. */
typedef uint64_t memo_e;
enum { ME_BIGINT = 10, ME_EMPTY = 15 };
#define ME_WIDE ((uint64_t)1 << 16)
#define ME_OFF_BITS 53

static inline int me_type(memo_e e) { return (int)(e & 15); }
static inline int me_role(memo_e e) { return (int)(e >> 4 & 15); }
static inline uint8_t me_flags(memo_e e) { return (uint8_t)(e >> 8); }
static inline int32_t me_val(memo_e e) { return (int32_t)(uint32_t)(e >> 32); }
static inline memo_e me_make(int type, int role, int flags, int32_t val)
{
    return (uint64_t)type | (uint64_t)role << 4 | (uint64_t)(uint8_t)flags << 8 | (uint64_t)(uint32_t)val << 32;
}
static inline memo_e me_set_val(memo_e e, int32_t val) { return (e & 0xFFFFFFFFu) | (uint64_t)(uint32_t)val << 32; }
/* the open entry of the container at stack index i (its own, not an entry since reused) */
static inline int me_open_at(memo_e e, size_t i)
{
    return me_type(e) >= T_DICT && me_type(e) <= T_LIST && (me_flags(e) & F_OPEN) && (size_t)(uint32_t)me_val(e) == i;
}

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    sigjmp_buf jb; /* errors jump here (sigsetjmp: a SIGBUS jump restores the signal mask) */
    int kind;
    size_t err_off;
    char msg[200];
    sn_out out;
    slot *st;
    size_t nst, st_cap;
    size_t *marks; /* stack indexes of the MARKs */
    size_t nmarks, marks_cap;
    memo_e *memo;
    size_t nmemo, memo_cap, memo_max;
    int64_t *pairs; /* memoized pair tuples: a, b */
    size_t npairs, pairs_cap;
    int64_t *wide; /* memoized ints beyond 32 bits, floats (rare: pickle memoizes neither) */
    size_t nwide, wide_cap;
    PyObject **objs; /* memoized extras objects (owned) */
    size_t nobjs, objs_cap;
    int32_t *scratch; /* frames of open frame lists */
    size_t nscratch, scratch_cap;
    int64_t segs_started;
    int have_top, have_segments, have_traces;
    int64_t n_devices;
    PyObject *extras;    /* dict */
    int64_t extra_items; /* items put in the extra being read */
    int mapped;          /* buf is this reader's mmap of the file: pages behind pos are let go */
    size_t released;     /* bytes of the mapping let go so far */
    size_t release_step; /* .. every this many bytes read */
} reader;

#if defined(__GNUC__)
#define SR_NORETURN __attribute__((noreturn))
#else
#define SR_NORETURN
#endif

/* stops the read: kind E_*, the byte offset, a message (longjmps to r->jb) */
SR_NORETURN void sr_fail(reader *r, int kind, size_t off, const char *fmt, ...);

#define UNSUPPORTED(r, off, ...) sr_fail(r, E_UNSUPPORTED, off, __VA_ARGS__)

static inline void *grow(reader *r, void *p, size_t *cap, size_t need, size_t item)
{
    return need <= *cap ? p : sn_grow(&r->out, p, cap, need, item); /* the call only to grow */
}

/* ------------------------------------------------------------------ input */

static inline const uint8_t *take(reader *r, size_t n)
{
    if (n > r->len - r->pos)
        sr_fail(r, E_ERROR, r->len, "the pickle is truncated (it ends inside an opcode)");
    const uint8_t *p = r->buf + r->pos;
    r->pos += n;
    return p;
}

static inline uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ------------------------------------------------------------------ stack */

static inline slot *push(reader *r, int type)
{
    r->st = grow(r, r->st, &r->st_cap, r->nst + 1, sizeof(slot));
    slot *s = &r->st[r->nst++];
    s->type = (uint8_t)type;
    s->role = R_NONE;
    s->alias = 0;
    s->key = K_NONE;
    s->flags = 0;
    s->sid = -2;
    s->memo = -1;
    s->obj = NULL;
    s->hdr = 0;
    s->n = s->start = s->acc = s->parent = 0;
    return s;
}

/* the index of the last MARK (pickle's fence), or -1 */
static inline int64_t last_mark(reader *r)
{
    return r->nmarks ? (int64_t)r->marks[r->nmarks - 1] : -1;
}

/* removes the last MARK, which is on top of the stack */
static inline void pop_mark(reader *r)
{
    r->nst--;
    r->nmarks--;
}

/* the number of items above the fence */
static inline size_t above_fence(reader *r)
{
    return r->nst - (size_t)(last_mark(r) + 1);
}

static inline void need_items(reader *r, size_t at, size_t n)
{
    if (above_fence(r) < n)
        sr_fail(r, E_ERROR, at, "the pickle's stack underflows");
}

static inline int structural(int role) { return role >= R_TOP; }

void sr_memo_close(reader *r, slot *s);

/* drops the top slot (its owned object too; a memoized container's entry gets its id) */
static inline void drop(reader *r)
{
    slot *s = &r->st[--r->nst];
    if (s->memo >= 0)
        sr_memo_close(r, s);
    Py_CLEAR(s->obj);
}

static inline int64_t as_i64(const slot *v) { return v->type == T_INT && (v->flags & F_FITS) ? v->i : MISSING; }

static inline int hashable(const slot *v)
{
    return v->type <= T_BYTES || (v->type == T_TUPLE && (v->flags & F_HASHABLE));
}

/* snapshot_roles.c */
int sr_utf8_ok(const uint8_t *s, size_t n);
int sr_key_of(const uint8_t *p, size_t n);
void sr_push_mark(reader *r);
int sr_child_role(const slot *p, const slot *key, int type);
void sr_push_container(reader *r, size_t at, int type);

/* snapshot_attach.c */
void sr_setitem(reader *r, size_t at, slot *d, slot *k, slot *v);
void sr_append(reader *r, size_t at, slot *l, slot *v);

/* snapshot_memo.c */
void sr_memo_put(reader *r, size_t at, uint64_t idx);
void sr_memo_get(reader *r, size_t at, uint64_t idx);

#endif
