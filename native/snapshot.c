/* The streaming memory-snapshot reader: one pass over a snapshot pickle's opcodes into the
 * columns of tb_profiler/decode/snapshot_schema.py (snapshot_tables.c holds the output).
 *
 * A pickle is a stack machine: a dict is known to be a segment only when SETITEMS puts it
 * in the segments list, long after its blocks were read. So each dict / list gets a *role*
 * when it is pushed, guessed from where it sits (the open container under it and the key
 * before it), the rows are written as items arrive, and every SETITEM(S) / APPEND(S)
 * checks the guess. Python's pickler (and torch's _dump_snapshot, which is pickle.dump)
 * always writes the layout the guess assumes. Anything else -- a guess proved wrong, a
 * shared segment or entry (a memo reference the reader keeps no contents for), a
 * structure the reference reader would refuse -- stops the read as "unsupported" (kind 3),
 * and the Python side hands such a pickle to the reference reader when it is small.
 * Definite damage (truncation, a forbidden or unknown opcode, bad UTF-8, a missing memo
 * entry, a stack underflow) is an error (kind 1) with its byte offset: the reference
 * refuses those too.
 *
 * Memory: no Python object per entry. The memo keeps 16 bytes per memoized object (a
 * string is found again by its opcode's offset); completed entries wait on the value stack
 * only until their batch's APPENDS (1000 at most). allocator_settings and
 * external_annotations (small) are built as Python objects. Holds the GIL. */
#include "snapshot.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

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
static const char *const KEYS[K_COUNT] = {
    "", "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "allocated_size", "active_size", "requested_size", "stream", "segment_type",
    "segment_pool_id", "is_expandable", "frames", "blocks", "size", "state", "action", "addr", "time_us",
    "device_free", "compile_context", "user_metadata", "filename", "line", "name"};
static const char *const ACTIONS[] = {"alloc", "free_requested", "free_completed", "segment_alloc",
                                      "segment_free", "segment_map", "segment_unmap", "snapshot", "oom"};
static const char *const STATES[] = {"active_allocated", "active_pending_free", "inactive"};

/* slot flags */
#define F_FITS 1     /* T_INT: the value is in [-2**63, 2**64) (held as int64) */
#define F_UNSIGNED 2 /* T_INT: the value is >= 2**63 (the int64 is its bit pattern) */
#define F_HASHABLE 4 /* T_TUPLE: every item is hashable */
#define F_PAIR 8     /* T_TUPLE: two items (v[0], v[1] = as_i64 of each) */
#define F_EXACT 16   /* T_TUPLE: empty, or two signed int64 items (rebuildable) */
#define F_FINAL 32   /* memo of a container: aux holds its frame / stack id / object index */
#define F_ALIASED 64 /* memo of a container: a GET / DUP took it */
#define F_OPEN 128   /* memo of a container still being read (aux = its serial) */

typedef struct {
    uint8_t type, role, alias, key, flags;
    uint8_t hdr;     /* T_STR / T_BYTES / big T_INT: 0: 1-byte, 1: 4-byte, 2: 8-byte length; 3: INT text */
    int32_t sid;     /* T_STR: string id (-2: not interned yet); FRAME: frame id; alias: memo aux */
    int64_t memo;    /* container: its memo index (-1 none) */
    uint32_t serial; /* container: unique number */
    size_t off, len; /* T_STR / T_BYTES: payload; T_INT without F_FITS: opcode offset */
    int64_t i;       /* T_INT / T_BOOL value; T_FLOAT bits */
    PyObject *obj;   /* R_EXTRA container (owned) */
    int64_t v[14];   /* a schema dict's fields (schema column order); T_TUPLE pair */
    int64_t n, start, acc, parent; /* lists: items, first row / scratch, offset sum, seg row / device */
} slot;

typedef struct {
    int64_t val;
    int32_t aux;
    uint8_t type, role, flags, key;
} memo_e;

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    jmp_buf jb;
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
    PyObject **objs; /* memoized extras objects (owned) */
    size_t nobjs, objs_cap;
    int32_t *scratch; /* frames of open frame lists */
    size_t nscratch, scratch_cap;
    uint32_t serial;
    int64_t segs_started;
    int have_top, have_segments, have_traces;
    int64_t n_devices;
    PyObject *extras;    /* dict */
    int64_t extra_items; /* items put in the extra being read */
} reader;

static void fail(reader *r, int kind, size_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->kind = kind;
    r->err_off = off;
    longjmp(r->jb, 1);
}

#define UNSUPPORTED(r, off, ...) fail(r, E_UNSUPPORTED, off, __VA_ARGS__)

static void *grow(reader *r, void *p, size_t *cap, size_t need, size_t item)
{
    return sn_grow(&r->out, p, cap, need, item);
}

/* ------------------------------------------------------------------ input */

static const uint8_t *take(reader *r, size_t n)
{
    if (n > r->len - r->pos)
        fail(r, E_ERROR, r->len, "the pickle is truncated (it ends inside an opcode)");
    const uint8_t *p = r->buf + r->pos;
    r->pos += n;
    return p;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Python's UTF-8 decoder with "surrogatepass" (what pickle uses for str) */
static int utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else
            return 0;
        if (n - i <= (size_t)k)
            return 0;
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += (size_t)k + 1;
    }
    return 1;
}

static int key_of(const uint8_t *p, size_t n)
{
    if (n < 4 || n > 22)
        return K_NONE;
    for (int k = 1; k < K_COUNT; k++)
        if (strlen(KEYS[k]) == n && memcmp(KEYS[k], p, n) == 0)
            return k;
    return K_NONE;
}

/* ------------------------------------------------------------------ stack */

static slot *push(reader *r, int type)
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
    s->serial = 0;
    s->hdr = 0;
    s->n = s->start = s->acc = s->parent = 0;
    return s;
}

/* the index of the last MARK (pickle's fence), or -1 */
static int64_t last_mark(reader *r)
{
    return r->nmarks ? (int64_t)r->marks[r->nmarks - 1] : -1;
}

static void push_mark(reader *r)
{
    r->marks = grow(r, r->marks, &r->marks_cap, r->nmarks + 1, sizeof(size_t));
    r->marks[r->nmarks++] = r->nst;
    push(r, T_MARK);
}

/* removes the last MARK, which is on top of the stack */
static void pop_mark(reader *r)
{
    r->nst--;
    r->nmarks--;
}

/* the number of items above the fence */
static size_t above_fence(reader *r)
{
    return r->nst - (size_t)(last_mark(r) + 1);
}

static void need_items(reader *r, size_t at, size_t n)
{
    if (above_fence(r) < n)
        fail(r, E_ERROR, at, "the pickle's stack underflows");
}

static int structural(int role) { return role >= R_TOP; }

/* drops the top slot (its owned object too) */
static void drop(reader *r)
{
    slot *s = &r->st[--r->nst];
    Py_CLEAR(s->obj);
}

/* ------------------------------------------------------------------ roles */

static int accepts(int role, int type)
{
    switch (role) {
    case R_SEGLIST: case R_BLOCKLIST: case R_ENTRYLIST: case R_FRAMELIST: return type == T_DICT;
    case R_DTLIST: return type == T_LIST;
    default: return 1;
    }
}

/* the role of a dict / list of `type` put in container p (under key, for a dict) */
static int child_role(const slot *p, const slot *key, int type)
{
    int k = key && key->type == T_STR ? key->key : K_NONE;
    switch (p->role) {
    case R_TOP:
        if (k == K_SEGMENTS && type == T_LIST)
            return R_SEGLIST;
        if (k == K_DEVICE_TRACES && type == T_LIST)
            return R_DTLIST;
        return k == K_ALLOCATOR_SETTINGS || k == K_EXTERNAL_ANNOTATIONS ? R_EXTRA : R_IGNORE;
    case R_SEG:
        if (k == K_BLOCKS && type == T_LIST)
            return R_BLOCKLIST;
        /* fall through */
    case R_BLOCK: case R_ENTRY:
        return k == K_FRAMES && type == T_LIST ? R_FRAMELIST : R_IGNORE;
    case R_SEGLIST: return type == T_DICT ? R_SEG : R_IGNORE;
    case R_BLOCKLIST: return type == T_DICT ? R_BLOCK : R_IGNORE;
    case R_DTLIST: return type == T_LIST ? R_ENTRYLIST : R_IGNORE;
    case R_ENTRYLIST: return type == T_DICT ? R_ENTRY : R_IGNORE;
    case R_FRAMELIST: return type == T_DICT ? R_FRAME : R_IGNORE;
    case R_EXTRA: return R_EXTRA;
    default: return R_IGNORE;
    }
}

static int single_form_candidate(const slot *s) { return s->n == 0 || s->n % BATCH == 0; }

/* guesses the role of a dict / list about to be pushed; *parent = the guessed container */
static int guess_role(reader *r, int type, int64_t *parent)
{
    *parent = -1;
    int64_t top = (int64_t)r->nst - 1, m = last_mark(r);
    /* the container just under the new one (single APPEND / SETITEM form), unless a MARK
     * is nearer; else the container under the last MARK */
    if (top >= 0 && top > m) {
        slot *s = &r->st[top];
        if (s->type == T_LIST && single_form_candidate(s) && accepts(s->role, type)) {
            *parent = top;
            return child_role(s, NULL, type);
        }
        slot *d = top - 1 > m ? &r->st[top - 1] : NULL;
        if (d && d->type == T_DICT && s->type == T_STR && single_form_candidate(d)) {
            *parent = top - 1;
            return child_role(d, s, type);
        }
    }
    if (m >= 0) {
        slot *p = m > 0 ? &r->st[m - 1] : NULL;
        if (!p || (p->type != T_DICT && p->type != T_LIST))
            return R_IGNORE; /* a tuple's items */
        *parent = m - 1;
        if (p->type == T_DICT)
            return (top - m) % 2 ? child_role(p, &r->st[top], type) : R_IGNORE;
        return child_role(p, NULL, type);
    }
    if (!r->have_top && type == T_DICT && r->nst == 0)
        return R_TOP;
    return R_IGNORE;
}

static void init_record(reader *r, slot *s)
{
    for (int i = 0; i < 14; i++)
        s->v[i] = MISSING;
    switch (s->role) {
    case R_ENTRY: /* device action action_text addr size stream time_us stack device_free cc um */
        s->v[1] = -1, s->v[2] = -1, s->v[7] = -1, s->v[9] = -1, s->v[10] = -1;
        break;
    case R_SEG: /* device .. requested stream segment_type pool_a pool_b is_exp stack start count */
        s->v[0] = -1, s->v[7] = -1, s->v[10] = -1, s->v[11] = -1;
        s->v[12] = (int64_t)r->out.t[SN_BLOCKS].n, s->v[13] = 0;
        s->acc = 0; /* blocks seen */
        break;
    case R_BLOCK: /* segment offset size requested state state_text stack */
        s->v[4] = -1, s->v[5] = -1, s->v[6] = -1;
        break;
    case R_FRAME:
        s->v[0] = -1, s->v[2] = -1;
        break;
    }
}

static void push_container(reader *r, size_t at, int type)
{
    int64_t parent;
    int role = guess_role(r, type, &parent);
    slot *s = push(r, type);
    s->role = (uint8_t)role;
    s->serial = ++r->serial;
    slot *p = parent >= 0 ? &r->st[parent] : NULL;
    init_record(r, s);
    switch (role) {
    case R_TOP: r->have_top = 1; break;
    case R_SEG: s->parent = r->segs_started++; break;
    case R_BLOCKLIST: s->start = (int64_t)r->out.t[SN_BLOCKS].n, s->parent = p->parent; break;
    case R_ENTRYLIST: s->parent = p->acc++; break; /* DTLIST.acc counts lists started */
    case R_FRAMELIST: s->start = (int64_t)r->nscratch; break;
    case R_EXTRA:
        if (p && p->role == R_TOP)
            r->extra_items = 0;
        s->obj = type == T_DICT ? PyDict_New() : PyList_New(0);
        if (!s->obj)
            fail(r, E_OOM, at, "out of memory");
        break;
    }
}

/* ------------------------------------------------------------------ values */

static int64_t as_i64(const slot *v) { return v->type == T_INT && (v->flags & F_FITS) ? v->i : MISSING; }

static int32_t string_id(reader *r, slot *v)
{
    if (v->type != T_STR)
        return -1;
    if (v->sid == -2)
        v->sid = sn_intern(&r->out, r->buf + v->off, v->len);
    return v->sid;
}

static void coded(reader *r, slot *v, const char *const *names, int n, int64_t *code, int64_t *text)
{
    *code = -1;
    *text = -1;
    if (v->type != T_STR)
        return;
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == v->len && memcmp(names[i], r->buf + v->off, v->len) == 0) {
            *code = i;
            return;
        }
    *text = string_id(r, v);
}

static int hashable(const slot *v)
{
    return v->type <= T_BYTES || (v->type == T_TUPLE && (v->flags & F_HASHABLE));
}

/* the Python object of a value put in allocator_settings / external_annotations */
static PyObject *to_py(reader *r, slot *v, size_t at)
{
    PyObject *o = NULL;
    switch (v->type) {
    case T_NONE: Py_RETURN_NONE;
    case T_BOOL: return PyBool_FromLong((long)v->i);
    case T_FLOAT: {
        double d;
        memcpy(&d, &v->i, 8);
        return PyFloat_FromDouble(d);
    }
    case T_INT:
        if (v->flags & F_UNSIGNED)
            return PyLong_FromUnsignedLongLong((unsigned long long)v->i);
        if (v->flags & F_FITS)
            return PyLong_FromLongLong(v->i);
        if (v->hdr == 3) { /* INT text (at most 19 digits) */
            char tmp[32];
            size_t n = v->len < sizeof tmp - 1 ? v->len : sizeof tmp - 1;
            memcpy(tmp, r->buf + v->off, n);
            tmp[n] = 0;
            return PyLong_FromString(tmp, NULL, 10);
        }
        return _PyLong_FromByteArray(r->buf + v->off, v->len, 1, 1);
    case T_STR: return PyUnicode_DecodeUTF8((const char *)r->buf + v->off, (Py_ssize_t)v->len, "surrogatepass");
    case T_BYTES: return PyBytes_FromStringAndSize((const char *)r->buf + v->off, (Py_ssize_t)v->len);
    case T_TUPLE:
        if (!(v->flags & F_EXACT))
            UNSUPPORTED(r, at, "a tuple of this kind in allocator_settings / external_annotations");
        return v->flags & F_PAIR ? Py_BuildValue("(LL)", (long long)v->v[0], (long long)v->v[1]) : PyTuple_New(0);
    default:
        if (v->role == R_EXTRA && v->obj) {
            Py_INCREF(v->obj);
            return v->obj;
        }
        UNSUPPORTED(r, at, "a shared or foreign container in allocator_settings / external_annotations");
    }
    return o;
}

/* ------------------------------------------------------------------ attaching */

/* checks that value v may go where the reader expects a container of role `expected` */
static void check_role(reader *r, size_t at, const slot *v, int expected)
{
    if (v->type != T_DICT && v->type != T_LIST)
        return;
    if (!v->alias) {
        if (v->role != expected)
            UNSUPPORTED(r, at, "a dict or list where the reader expected another layout");
        return;
    }
    if (expected == R_IGNORE || (expected == R_EXTRA && v->obj) ||
        ((expected == R_FRAME || expected == R_FRAMELIST) && v->role == expected && (v->flags & F_FINAL)))
        return;
    UNSUPPORTED(r, at, "a shared dict or list (memo reference) the streaming reader does not keep");
}

static void check_mutable(reader *r, size_t at, slot *d)
{
    if (!structural(d->role))
        return;
    if (d->alias || (d->memo >= 0 && (size_t)d->memo < r->nmemo && (r->memo[d->memo].flags & F_ALIASED) &&
                     r->memo[d->memo].aux == (int32_t)d->serial))
        UNSUPPORTED(r, at, "a shared dict or list changed after it was referenced");
}

static int64_t stack_of(reader *r, size_t at, slot *v)
{
    if (v->type == T_NONE)
        return -1;
    if (v->type != T_LIST)
        UNSUPPORTED(r, at, "'frames' is not a list");
    if (v->alias)
        return v->sid;
    int64_t id = sn_stack(&r->out, r->scratch + v->start, (size_t)v->n);
    if ((size_t)(v->start + v->n) != r->nscratch)
        UNSUPPORTED(r, at, "interleaved frame lists");
    r->nscratch = (size_t)v->start;
    if (v->memo >= 0 && (size_t)v->memo < r->nmemo) {
        memo_e *m = &r->memo[v->memo];
        if ((m->flags & F_OPEN) && m->aux == (int32_t)v->serial)
            m->flags |= F_FINAL, m->val = id;
    }
    return id;
}

static void frame_final(reader *r, slot *f);

static void set_field(reader *r, size_t at, slot *d, slot *k, slot *v)
{
    int key = k->type == T_STR ? k->key : K_NONE;
    int64_t *x = d->v;
    switch (d->role) {
    case R_TOP:
        if (key == K_SEGMENTS || key == K_DEVICE_TRACES) {
            int *seen = key == K_SEGMENTS ? &r->have_segments : &r->have_traces;
            if (*seen || v->type != T_LIST || v->alias)
                UNSUPPORTED(r, at, "'%s' repeated, shared or not a list", KEYS[key]);
            *seen = 1;
            if (key == K_DEVICE_TRACES)
                r->n_devices = v->n;
        } else if (key == K_ALLOCATOR_SETTINGS || key == K_EXTERNAL_ANNOTATIONS) {
            PyObject *o = r->extra_items > EXTRA_LIMIT ? (Py_INCREF(Py_None), Py_None) : to_py(r, v, at);
            if (!o || PyDict_SetItemString(r->extras, KEYS[key], o) < 0) {
                Py_XDECREF(o);
                fail(r, E_OOM, at, "cannot keep %s", KEYS[key]);
            }
            Py_DECREF(o);
        }
        return;
    case R_ENTRY:
        switch (key) {
        case K_ACTION: coded(r, v, ACTIONS, 9, &x[1], &x[2]); return;
        case K_ADDR: x[3] = as_i64(v); return;
        case K_SIZE: x[4] = as_i64(v); return;
        case K_STREAM: x[5] = as_i64(v); return;
        case K_TIME_US: x[6] = as_i64(v); return;
        case K_FRAMES: x[7] = stack_of(r, at, v); return;
        case K_DEVICE_FREE: x[8] = as_i64(v); return;
        case K_COMPILE_CONTEXT: x[9] = string_id(r, v); return;
        case K_USER_METADATA: x[10] = string_id(r, v); return;
        }
        return;
    case R_SEG:
        switch (key) {
        case K_DEVICE: {
            int64_t d64 = as_i64(v);
            x[0] = d64 != MISSING && !(v->flags & F_UNSIGNED) && d64 >= INT32_MIN && d64 <= INT32_MAX ? d64 : -1;
            return;
        }
        case K_ADDRESS: x[1] = as_i64(v); return;
        case K_TOTAL_SIZE: x[2] = as_i64(v); return;
        case K_ALLOCATED_SIZE: x[3] = as_i64(v); return;
        case K_ACTIVE_SIZE: x[4] = as_i64(v); return;
        case K_REQUESTED_SIZE: x[5] = as_i64(v); return;
        case K_STREAM: x[6] = as_i64(v); return;
        case K_SEGMENT_TYPE: x[7] = string_id(r, v); return;
        case K_SEGMENT_POOL_ID:
            x[8] = x[9] = MISSING;
            if (v->type == T_TUPLE && (v->flags & F_PAIR))
                x[8] = v->v[0], x[9] = v->v[1];
            return;
        case K_IS_EXPANDABLE: x[10] = v->type == T_BOOL ? v->i : -1; return;
        case K_FRAMES: x[11] = stack_of(r, at, v); return;
        case K_BLOCKS:
            if (d->acc++ || v->type != T_LIST || v->alias || v->parent != d->parent)
                UNSUPPORTED(r, at, "a segment's 'blocks' repeated, shared or not a list");
            x[12] = v->start, x[13] = v->n;
            return;
        }
        return;
    case R_BLOCK:
        switch (key) {
        case K_SIZE: x[2] = as_i64(v); return;
        case K_REQUESTED_SIZE: x[3] = as_i64(v); return;
        case K_STATE: coded(r, v, STATES, 3, &x[4], &x[5]); return;
        case K_FRAMES: x[6] = stack_of(r, at, v); return;
        }
        return;
    case R_FRAME:
        switch (key) {
        case K_FILENAME: x[0] = string_id(r, v); break;
        case K_LINE: x[1] = as_i64(v); break;
        case K_NAME: x[2] = string_id(r, v); break;
        default: return;
        }
        frame_final(r, d);
        return;
    }
}

/* a frame dict's frame id, kept current after each change (a frame dict may be shared) */
static void frame_final(reader *r, slot *f)
{
    f->sid = sn_frame(&r->out, (int32_t)f->v[0], f->v[1], (int32_t)f->v[2]);
    if (f->memo >= 0 && (size_t)f->memo < r->nmemo) {
        memo_e *m = &r->memo[f->memo];
        if ((m->flags & F_OPEN) && m->aux == (int32_t)f->serial) {
            m->flags |= F_FINAL;
            m->val = f->sid;
        }
    }
}

static void setitem(reader *r, size_t at, slot *d, slot *k, slot *v)
{
    if (d->type != T_DICT)
        UNSUPPORTED(r, at, "SETITEM on something other than a dict");
    if (!hashable(k))
        UNSUPPORTED(r, at, "an unhashable dict key");
    check_mutable(r, at, d);
    int expected = (v->type == T_DICT || v->type == T_LIST) ? child_role(d, k, v->type) : R_NONE;
    check_role(r, at, v, expected);
    if (d->role == R_EXTRA) {
        if (++r->extra_items > EXTRA_LIMIT)
            return;
        PyObject *ko = to_py(r, k, at), *vo = ko ? to_py(r, v, at) : NULL;
        int rc = vo ? PyDict_SetItem(d->obj, ko, vo) : -1;
        Py_XDECREF(ko);
        Py_XDECREF(vo);
        if (rc < 0)
            UNSUPPORTED(r, at, "a value allocator_settings cannot hold");
        return;
    }
    if (d->type == T_DICT && structural(d->role))
        set_field(r, at, d, k, v);
    d->n++;
}

static void write_row(reader *r, size_t at, slot *l, slot *v)
{
    sn_out *o = &r->out;
    int64_t *x = v->v;
    switch (l->role) {
    case R_SEGLIST:
        if (v->parent != (int64_t)o->t[SN_SEGMENTS].n)
            UNSUPPORTED(r, at, "segments out of order");
        for (int c = 0; c < 14; c++) {
            if (c == 0 || c == 7 || c == 11 || c == 13)
                sn_push_i32(o, SN_SEGMENTS, c, (int32_t)x[c]);
            else if (c == 10)
                sn_push_i8(o, SN_SEGMENTS, c, (int8_t)x[c]);
            else
                sn_push_i64(o, SN_SEGMENTS, c, x[c]);
        }
        sn_row_end(o, SN_SEGMENTS);
        return;
    case R_BLOCKLIST:
        sn_push_i32(o, SN_BLOCKS, 0, (int32_t)l->parent);
        sn_push_i64(o, SN_BLOCKS, 1, l->acc);
        sn_push_i64(o, SN_BLOCKS, 2, x[2]);
        sn_push_i64(o, SN_BLOCKS, 3, x[3]);
        sn_push_i8(o, SN_BLOCKS, 4, (int8_t)x[4]);
        sn_push_i32(o, SN_BLOCKS, 5, (int32_t)x[5]);
        sn_push_i32(o, SN_BLOCKS, 6, (int32_t)x[6]);
        sn_row_end(o, SN_BLOCKS);
        l->acc = (int64_t)((uint64_t)l->acc + (uint64_t)(x[2] == MISSING ? 0 : x[2]));
        return;
    case R_DTLIST:
        if (v->parent != l->n)
            UNSUPPORTED(r, at, "device traces out of order");
        return;
    case R_ENTRYLIST:
        sn_push_i32(o, SN_HISTORY, 0, (int32_t)l->parent);
        sn_push_i8(o, SN_HISTORY, 1, (int8_t)x[1]);
        for (int c = 2; c < 11; c++) {
            if (c == 2 || c == 7 || c == 9 || c == 10)
                sn_push_i32(o, SN_HISTORY, c, (int32_t)x[c]);
            else
                sn_push_i64(o, SN_HISTORY, c, x[c]);
        }
        sn_row_end(o, SN_HISTORY);
        return;
    case R_FRAMELIST:
        if ((size_t)(l->start + l->n) != r->nscratch)
            UNSUPPORTED(r, at, "interleaved frame lists");
        r->scratch = grow(r, r->scratch, &r->scratch_cap, r->nscratch + 1, sizeof(int32_t));
        if (!v->alias && v->sid < 0)
            frame_final(r, v);
        r->scratch[r->nscratch++] = v->sid;
        return;
    }
}

static void append(reader *r, size_t at, slot *l, slot *v)
{
    if (l->type != T_LIST)
        UNSUPPORTED(r, at, "APPEND on something other than a list");
    check_mutable(r, at, l);
    int expected = (v->type == T_DICT || v->type == T_LIST) ? child_role(l, NULL, v->type) : R_NONE;
    if (structural(l->role) && (expected == R_IGNORE || v->type != (l->role == R_DTLIST ? T_LIST : T_DICT)))
        UNSUPPORTED(r, at, "an item of another type than the snapshot's list holds");
    check_role(r, at, v, expected);
    if (l->role == R_EXTRA) {
        if (++r->extra_items > EXTRA_LIMIT)
            return;
        PyObject *o = to_py(r, v, at);
        int rc = o ? PyList_Append(l->obj, o) : -1;
        Py_XDECREF(o);
        if (rc < 0)
            fail(r, E_OOM, at, "out of memory");
        return;
    }
    write_row(r, at, l, v);
    l->n++;
}

/* ------------------------------------------------------------------ memo */

static void memo_put(reader *r, size_t at, uint64_t idx)
{
    if (above_fence(r) < 1)
        fail(r, E_ERROR, at, "the pickle's stack underflows");
    if (idx > r->memo_max)
        UNSUPPORTED(r, at, "a memo index beyond the file's size");
    if (idx >= r->nmemo) {
        size_t cap0 = r->memo_cap;
        r->memo = grow(r, r->memo, &r->memo_cap, idx + 1, sizeof(memo_e));
#ifdef MADV_HUGEPAGE
        /* GETs jump around the memo (a frame memoized at the start is used at the end):
         * huge pages spare the TLB misses that otherwise dominate */
        if (r->memo_cap != cap0 && r->memo_cap * sizeof(memo_e) >= ((size_t)4 << 20)) {
            uintptr_t a = ((uintptr_t)r->memo + ((1u << 21) - 1)) & ~(uintptr_t)((1u << 21) - 1);
            uintptr_t b = ((uintptr_t)r->memo + r->memo_cap * sizeof(memo_e)) & ~(uintptr_t)((1u << 21) - 1);
            if (b > a)
                madvise((void *)a, b - a, MADV_HUGEPAGE);
        }
#endif
        for (size_t i = r->nmemo; i <= idx; i++)
            r->memo[i].type = 0xFF; /* empty */
        r->nmemo = idx + 1;
    }
    memo_e *m = &r->memo[idx];
    slot *s = &r->st[r->nst - 1];
    m->type = s->type;
    m->role = s->role;
    m->key = s->key;
    m->flags = s->flags & (F_FITS | F_UNSIGNED | F_HASHABLE | F_PAIR | F_EXACT);
    m->aux = s->sid;
    m->val = s->i;
    switch (s->type) {
    case T_STR: case T_BYTES: m->val = (int64_t)((uint64_t)s->off | (uint64_t)s->hdr << 62); break;
    case T_INT:
        if (!(s->flags & F_FITS))
            m->val = (int64_t)((uint64_t)s->off | (uint64_t)s->hdr << 62);
        break;
    case T_TUPLE:
        m->aux = -1;
        if (s->flags & F_PAIR) {
            r->pairs = grow(r, r->pairs, &r->pairs_cap, 2 * r->npairs + 2, sizeof(int64_t));
            r->pairs[2 * r->npairs] = s->v[0];
            r->pairs[2 * r->npairs + 1] = s->v[1];
            m->aux = (int32_t)r->npairs++;
        }
        break;
    case T_DICT: case T_LIST:
        if (s->alias && !s->obj) { /* a GET / DUP memoized again: the same contents */
            m->flags = (uint8_t)((s->flags & F_FINAL) | F_ALIASED);
            m->aux = -1;
            m->val = s->sid;
        } else if (s->role == R_EXTRA && s->obj) {
            r->objs = grow(r, r->objs, &r->objs_cap, r->nobjs + 1, sizeof(PyObject *));
            Py_INCREF(s->obj);
            r->objs[r->nobjs] = s->obj;
            m->aux = (int32_t)r->nobjs++;
            m->flags = F_FINAL;
        } else {
            s->memo = (int64_t)idx;
            m->flags = F_OPEN;
            m->aux = (int32_t)s->serial;
            if (s->role == R_FRAME && s->sid >= 0)
                m->flags |= F_FINAL, m->val = s->sid;
        }
        break;
    }
}

/* a memoized string / bytes / big int: its payload offset and length (val = off | hdr << 62) */
static void payload_of(reader *r, int64_t val, slot *s)
{
    static const int HDR[3] = {1, 4, 8};
    s->hdr = (uint8_t)((uint64_t)val >> 62);
    s->off = (size_t)(val & (((int64_t)1 << 62) - 1));
    if (s->hdr == 3) { /* INT text: up to the newline */
        const uint8_t *nl = memchr(r->buf + s->off, '\n', r->len - s->off);
        s->len = (size_t)(nl - (r->buf + s->off));
    } else
        s->len = (size_t)le(r->buf + s->off - HDR[s->hdr], HDR[s->hdr]);
}

/* a frame dict / frame list referenced while it is still open (a recursive stack repeats a
 * frame; a block's frames may be its segment's): its value as it stands, from its slot.
 * Changing it afterwards is refused (check_mutable). */
static void settle(reader *r, memo_e *m)
{
    for (size_t i = r->nst; i-- > 0;) {
        slot *s = &r->st[i];
        if (s->alias || s->serial != (uint32_t)m->aux || (s->type != T_DICT && s->type != T_LIST))
            continue;
        if (m->role == R_FRAME)
            s->sid = sn_frame(&r->out, (int32_t)s->v[0], s->v[1], (int32_t)s->v[2]);
        else if ((size_t)(s->start + s->n) == r->nscratch)
            s->sid = sn_stack(&r->out, r->scratch + s->start, (size_t)s->n);
        else
            return;
        m->val = s->sid;
        m->flags |= F_FINAL;
        return;
    }
}

static void memo_get(reader *r, size_t at, uint64_t idx)
{
    if (idx >= r->nmemo || r->memo[idx].type == 0xFF)
        fail(r, E_ERROR, at, "the pickle refers to memo entry %llu, which was never stored",
             (unsigned long long)idx);
    memo_e *m = &r->memo[idx];
    slot *s = push(r, m->type);
    s->role = m->role;
    s->key = m->key;
    s->flags = m->flags;
    s->sid = m->aux;
    s->i = m->val;
    switch (m->type) {
    case T_STR: case T_BYTES:
        payload_of(r, m->val, s);
        s->i = 0;
        break;
    case T_INT:
        if (!(m->flags & F_FITS))
            payload_of(r, m->val, s);
        break;
    case T_TUPLE:
        if (m->aux >= 0)
            s->v[0] = r->pairs[2 * (size_t)m->aux], s->v[1] = r->pairs[2 * (size_t)m->aux + 1];
        break;
    case T_DICT: case T_LIST:
        s->alias = 1;
        if ((m->flags & F_OPEN) && !(m->flags & F_FINAL) && (m->role == R_FRAME || m->role == R_FRAMELIST))
            settle(r, m);
        s->flags = m->flags;
        m->flags |= F_ALIASED;
        if (m->flags & F_FINAL) {
            if (m->role == R_EXTRA) {
                s->obj = r->objs[m->aux];
                Py_INCREF(s->obj);
            } else
                s->sid = (int32_t)m->val;
        } else
            s->flags &= (uint8_t)~F_FINAL;
        break;
    }
}

/* ------------------------------------------------------------------ opcodes */

static void push_int(reader *r, int64_t v, int fits, int is_unsigned)
{
    slot *s = push(r, T_INT);
    s->i = v;
    s->flags = (uint8_t)((fits ? F_FITS : 0) | (is_unsigned ? F_UNSIGNED : 0));
}

/* LONG1 / LONG4: little-endian two's complement of n bytes */
static void push_long(reader *r, const uint8_t *p, size_t n, int hdr)
{
    size_t m = n;
    int neg = n && (p[n - 1] & 0x80);
    /* drop redundant sign bytes */
    while (m > 1 && p[m - 1] == (neg ? 0xFF : 0x00) && ((p[m - 2] & 0x80) != 0) == neg)
        m--;
    if (!neg && m > 1 && p[m - 1] == 0 && m - 1 <= 8)
        m--; /* a positive value with its top bit set keeps a zero byte: <= 2**64 - 1 */
    slot *s;
    if (m <= 8) {
        uint64_t u = le(p, (int)m);
        if (neg && m < 8)
            u |= ~(uint64_t)0 << (8 * m);
        int is_unsigned = !neg && m == 8 && (u >> 63);
        push_int(r, (int64_t)u, 1, is_unsigned);
        if (!neg && m == 8 && (u >> 63) && !is_unsigned)
            r->st[r->nst - 1].flags = 0;
        s = &r->st[r->nst - 1];
    } else
        s = push(r, T_INT), s->flags = 0;
    s->off = (size_t)(p - r->buf);
    s->len = n;
    s->hdr = (uint8_t)hdr;
}

static void push_text(reader *r, size_t at, int type, uint64_t n, int hdr)
{
    if (n > r->len - r->pos)
        fail(r, E_ERROR, r->len, "the pickle is truncated (a string runs past its end)");
    const uint8_t *p = take(r, (size_t)n);
    if (type == T_STR && !utf8_ok(p, (size_t)n))
        fail(r, E_ERROR, at, "a string is not valid UTF-8");
    slot *s = push(r, type);
    s->off = (size_t)(p - r->buf);
    s->len = (size_t)n;
    s->hdr = (uint8_t)hdr;
    if (type == T_STR)
        s->key = (uint8_t)key_of(p, (size_t)n);
}

/* the decimal text of INT / PUT / GET up to its newline (plain digits, as the reference
 * reader requires); *neg set for a leading minus (INT only) */
static const uint8_t *decimal_line(reader *r, size_t at, int allow_minus, size_t *len)
{
    const uint8_t *p = r->buf + r->pos;
    const uint8_t *nl = memchr(p, '\n', r->len - r->pos);
    if (!nl)
        fail(r, E_ERROR, r->len, "the pickle is truncated (a line without its newline)");
    size_t n = (size_t)(nl - p), i = allow_minus && n && p[0] == '-';
    if (n == i || n - i > 18)
        fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
    size_t d0 = i;
    for (; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
    /* INT's text is read by strtol(base 0): a leading zero is octal, so only 0, 00, 01 */
    if (allow_minus && p[d0] == '0' && n - d0 > 1 && !(d0 == 0 && n == 2 && p[1] <= '1'))
        fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
    r->pos += n + 1;
    *len = n;
    return p;
}

static long long parse_dec(const uint8_t *p, size_t n)
{
    int neg = n && p[0] == '-';
    long long v = 0;
    for (size_t i = (size_t)neg; i < n; i++)
        v = v * 10 + (p[i] - '0');
    return neg ? -v : v;
}

/* pops the items above the last mark and the mark; returns their first index */
static size_t mark_items(reader *r, size_t at, size_t *count)
{
    int64_t m = last_mark(r);
    if (m < 0)
        fail(r, E_ERROR, at, "the pickle has no MARK where one is needed");
    *count = r->nst - (size_t)m - 1;
    return (size_t)m + 1;
}

static void op_tuple(reader *r, size_t at, size_t first, size_t n, int with_mark)
{
    slot t;
    memset(&t, 0, sizeof t);
    t.type = T_TUPLE;
    t.memo = -1;
    t.sid = -2;
    t.flags = F_HASHABLE;
    for (size_t i = 0; i < n; i++) {
        slot *it = &r->st[first + i];
        if (structural(it->role) && !it->alias)
            UNSUPPORTED(r, at, "a snapshot dict or list inside a tuple");
        if (!hashable(it))
            t.flags &= (uint8_t)~F_HASHABLE;
    }
    if (n == 2) {
        slot *a = &r->st[first], *b = &r->st[first + 1];
        t.flags |= F_PAIR;
        t.v[0] = as_i64(a);
        t.v[1] = as_i64(b);
        if (t.v[0] != MISSING && t.v[1] != MISSING && !((a->flags | b->flags) & F_UNSIGNED))
            t.flags |= F_EXACT;
    }
    if (n == 0)
        t.flags |= F_EXACT;
    while (r->nst > first)
        drop(r);
    if (with_mark)
        pop_mark(r);
    r->st = grow(r, r->st, &r->st_cap, r->nst + 1, sizeof(slot));
    r->st[r->nst++] = t;
}

static void discard(reader *r, size_t at, size_t first)
{
    for (size_t i = first; i < r->nst; i++)
        if (structural(r->st[i].role) && !r->st[i].alias)
            UNSUPPORTED(r, at, "a snapshot dict or list dropped from the stack");
    while (r->nst > first)
        drop(r);
}

static const struct { uint8_t op; const char *name; } FORBIDDEN[] = {
    {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"}, {'b', "BUILD"}, {'i', "INST"}, {'o', "OBJ"},
    {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {0x82, "EXT1"},
    {0x83, "EXT2"}, {0x84, "EXT4"}, {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"},
    {'V', "UNICODE"}, {'F', "FLOAT"}, {'L', "LONG"}, {'d', "DICT"}, {'l', "LIST"}, {0x8f, "EMPTY_SET"},
    {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x96, "BYTEARRAY8"}, {0x97, "NEXT_BUFFER"},
    {0x98, "READONLY_BUFFER"}};

/* returns at STOP with the snapshot dict on top */
static void run(reader *r)
{
    size_t frame_end = 0, at = 0;
    for (;; ) {
        /* frames as pickle's spec has them: no opcode straddles a frame's end */
        if (at < frame_end && r->pos > frame_end)
            fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
        at = r->pos;
        uint8_t op = *take(r, 1);
        size_t n, first;
        switch (op) {
        case 0x80: /* PROTO */
            if (*take(r, 1) > 5)
                fail(r, E_ERROR, at, "unsupported pickle protocol %d", r->buf[at + 1]);
            break;
        case 0x95: /* FRAME */
            if (at < frame_end)
                fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
            n = (size_t)le(take(r, 8), 8);
            if (n > r->len - r->pos)
                fail(r, E_ERROR, r->len, "the pickle is truncated (a frame runs past its end)");
            frame_end = r->pos + n;
            break;
        case '}': push_container(r, at, T_DICT); break;
        case ']': push_container(r, at, T_LIST); break;
        case ')': op_tuple(r, at, r->nst, 0, 0); break;
        case '(': push_mark(r); break;
        case '0': /* POP: the mark itself when it is on top */
            if (r->nst && r->st[r->nst - 1].type == T_MARK)
                pop_mark(r);
            else {
                need_items(r, at, 1);
                discard(r, at, r->nst - 1);
            }
            break;
        case '1': /* POP_MARK */
            first = mark_items(r, at, &n);
            discard(r, at, first);
            pop_mark(r);
            break;
        case '2': { /* DUP */
            need_items(r, at, 1);
            slot *t = &r->st[r->nst - 1];
            if ((t->type == T_DICT || t->type == T_LIST) && structural(t->role) && !t->alias)
                UNSUPPORTED(r, at, "DUP of a snapshot dict or list");
            slot copy = *t;
            if (copy.type == T_DICT || copy.type == T_LIST)
                copy.alias = 1, copy.memo = -1;
            Py_XINCREF(copy.obj);
            r->st = grow(r, r->st, &r->st_cap, r->nst + 1, sizeof(slot));
            r->st[r->nst++] = copy;
            break;
        }
        case 's': /* SETITEM */
            need_items(r, at, 3);
            setitem(r, at, &r->st[r->nst - 3], &r->st[r->nst - 2], &r->st[r->nst - 1]);
            drop(r);
            drop(r);
            break;
        case 'u': /* SETITEMS */
            first = mark_items(r, at, &n);
            if (n % 2)
                fail(r, E_ERROR, at, "odd number of items for SETITEMS");
            if (first < 2 || r->st[first - 2].type == T_MARK)
                fail(r, E_ERROR, at, "the pickle's stack underflows");
            for (size_t i = first; i < r->nst; i += 2)
                setitem(r, at, &r->st[first - 2], &r->st[i], &r->st[i + 1]);
            while (r->nst > first)
                drop(r);
            pop_mark(r);
            break;
        case 'a': /* APPEND */
            need_items(r, at, 2);
            append(r, at, &r->st[r->nst - 2], &r->st[r->nst - 1]);
            drop(r);
            break;
        case 'e': /* APPENDS */
            first = mark_items(r, at, &n);
            if (first < 2 || r->st[first - 2].type == T_MARK)
                fail(r, E_ERROR, at, "the pickle's stack underflows");
            for (size_t i = first; i < r->nst; i++)
                append(r, at, &r->st[first - 2], &r->st[i]);
            while (r->nst > first)
                drop(r);
            pop_mark(r);
            break;
        case 't': first = mark_items(r, at, &n); op_tuple(r, at, first, n, 1); break;
        case 0x85: case 0x86: case 0x87:
            n = (size_t)(op - 0x84);
            need_items(r, at, n);
            op_tuple(r, at, r->nst - n, n, 0);
            break;
        case 'J': push_int(r, (int32_t)(uint32_t)le(take(r, 4), 4), 1, 0); break;
        case 'K': push_int(r, *take(r, 1), 1, 0); break;
        case 'M': push_int(r, (int64_t)le(take(r, 2), 2), 1, 0); break;
        case 0x8a: n = *take(r, 1); push_long(r, take(r, n), n, 0); break;
        case 0x8b: {
            int32_t m = (int32_t)(uint32_t)le(take(r, 4), 4);
            if (m < 0)
                fail(r, E_ERROR, at, "LONG pickle has negative byte count");
            push_long(r, take(r, (size_t)m), (size_t)m, 1);
            break;
        }
        case 'I': { /* INT: "00" / "01" (and "-0") are False / True, as in pickle */
            const uint8_t *p = decimal_line(r, at + 1, 1, &n);
            long long v = parse_dec(p, n);
            if (n == 2 && (v == 0 || v == 1)) {
                slot *s = push(r, T_BOOL);
                s->i = v;
            } else {
                push_int(r, v, 1, 0);
                r->st[r->nst - 1].off = (size_t)(p - r->buf), r->st[r->nst - 1].len = n, r->st[r->nst - 1].hdr = 3;
            }
            break;
        }
        case 'G': {
            uint64_t bits = 0;
            const uint8_t *p = take(r, 8);
            for (int i = 0; i < 8; i++)
                bits = bits << 8 | p[i];
            slot *s = push(r, T_FLOAT);
            s->i = (int64_t)bits;
            break;
        }
        case 0x88: case 0x89: push(r, T_BOOL)->i = op == 0x88; break;
        case 'N': push(r, T_NONE); break;
        case 0x8c: push_text(r, at, T_STR, *take(r, 1), 0); break;
        case 'X': push_text(r, at, T_STR, le(take(r, 4), 4), 1); break;
        case 0x8d: push_text(r, at, T_STR, le(take(r, 8), 8), 2); break;
        case 'C': push_text(r, at, T_BYTES, *take(r, 1), 0); break;
        case 'B': push_text(r, at, T_BYTES, le(take(r, 4), 4), 1); break;
        case 0x8e: push_text(r, at, T_BYTES, le(take(r, 8), 8), 2); break;
        case 0x94: memo_put(r, at, r->nmemo); break;
        case 'q': memo_put(r, at, *take(r, 1)); break;
        case 'r': memo_put(r, at, le(take(r, 4), 4)); break;
        case 'p': { const uint8_t *p = decimal_line(r, at + 1, 0, &n); memo_put(r, at, (uint64_t)parse_dec(p, n)); break; }
        case 'h': memo_get(r, at, *take(r, 1)); break;
        case 'j': memo_get(r, at, le(take(r, 4), 4)); break;
        case 'g': { const uint8_t *p = decimal_line(r, at + 1, 0, &n); memo_get(r, at, (uint64_t)parse_dec(p, n)); break; }
        case '.': /* STOP */
            if (at < frame_end && r->pos > frame_end)
                fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
            need_items(r, at, 1);
            for (size_t i = 0; i + 1 < r->nst; i++)
                if (structural(r->st[i].role) && !r->st[i].alias)
                    UNSUPPORTED(r, at, "a snapshot dict or list left on the stack");
            if (r->st[r->nst - 1].role != R_TOP || r->st[r->nst - 1].alias)
                UNSUPPORTED(r, at, "the pickle does not hold a snapshot dict");
            return;
        default:
            for (size_t i = 0; i < sizeof FORBIDDEN / sizeof FORBIDDEN[0]; i++)
                if (FORBIDDEN[i].op == op)
                    fail(r, E_ERROR, at, "the pickle uses the opcode %s, which could run code or build something "
                         "other than plain dicts, lists, strings and numbers", FORBIDDEN[i].name);
            fail(r, E_ERROR, at, "damaged pickle (unknown opcode 0x%02x)", op);
        }
    }
}

/* ------------------------------------------------------------------ Python */

static int put(PyObject *d, const char *k, PyObject *v)
{
    if (!v)
        return -1;
    int rc = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *result(reader *r)
{
    sn_out *o = &r->out;
    PyObject *out = PyDict_New(), *tables = PyDict_New(), *strings = PyList_New((Py_ssize_t)o->nstr);
    if (!out || !tables || !strings)
        goto fail;
    for (size_t i = 0; i < o->nstr; i++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)o->arena + o->str_off[i], (Py_ssize_t)o->str_len[i],
                                           "surrogatepass");
        if (!s)
            goto fail;
        PyList_SET_ITEM(strings, (Py_ssize_t)i, s);
    }
    for (int t = 0; t < SN_NTABLES; t++) {
        sn_table *tb = &o->t[t];
        PyObject *cols = PyDict_New();
        if (put(tables, tb->name, cols) < 0)
            goto fail;
        for (int c = 0; c < tb->ncols; c++) {
            sn_col *col = &tb->cols[c];
            PyObject *buf = tb_buffer_take((void **)&col->data, tb->n * col->itemsize);
            if (put(cols, col->name, buf ? Py_BuildValue("(NC)", buf, col->format) : NULL) < 0)
                goto fail;
        }
    }
    if (!o->stack_off) {
        o->stack_off = calloc(1, 8);
        if (!o->stack_off)
            goto fail;
    }
    if (put(out, "tables", tables) < 0 || (tables = NULL) ||
        put(out, "strings", strings) < 0 || (strings = NULL) ||
        put(out, "stack_offsets", tb_buffer_take((void **)&o->stack_off, (o->nstack + 1) * 8)) < 0 ||
        put(out, "stack_frames", tb_buffer_take((void **)&o->stack_frames, o->nsf * 4)) < 0 ||
        PyDict_SetItemString(out, "extras", r->extras) < 0 ||
        put(out, "n_devices", PyLong_FromLongLong(r->n_devices)) < 0)
        goto fail;
    return out;
fail:
    Py_XDECREF(out);
    Py_XDECREF(tables);
    Py_XDECREF(strings);
    return NULL;
}

static void reader_free(reader *r)
{
    while (r->nst)
        drop(r);
    free(r->st);
    free(r->marks);
    free(r->memo);
    free(r->pairs);
    for (size_t i = 0; i < r->nobjs; i++)
        Py_DECREF(r->objs[i]);
    free(r->objs);
    free(r->scratch);
    Py_XDECREF(r->extras);
    sn_out_free(&r->out);
}

const char tb_read_snapshot_doc[] =
    "read_snapshot(buf) -> dict: the columns of a memory-snapshot pickle held in buf (bytes-like).\n"
    "Raises ValueError(kind, message, byte_offset): kind 1 damaged or refused, 3 a layout the streaming\n"
    "reader does not follow (the reference reader may read it).";

PyObject *tb_read_snapshot(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    reader *r = calloc(1, sizeof *r);
    if (!r) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    r->buf = view.buf;
    r->len = (size_t)view.len;
    r->memo_max = r->len + 1024;
    sn_out_init(&r->out, &r->jb, r->msg);
    PyObject *res = NULL;
    r->extras = PyDict_New();
    if (r->extras && setjmp(r->jb) == 0) {
        run(r);
        res = result(r);
    } else if (r->extras) {
        if (PyErr_Occurred())
            PyErr_Clear();
        PyErr_SetObject(PyExc_ValueError, Py_BuildValue("(isn)", r->kind ? r->kind : E_OOM, r->msg,
                                                        (Py_ssize_t)r->err_off));
    }
    reader_free(r);
    free(r);
    PyBuffer_Release(&view);
    return res;
}
