/* The streaming snapshot reader's memo (PUT / GET): 8 bytes per memoized object (memo_e).
 * A string is found again by its opcode's offset, a pair tuple in a side table, a container
 * by its role and its stack index while open, then its frame / stack id. */
#include "snapshot_reader.h"

#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* a 32-bit index into a side table (refused beyond: a file of tens of GB) */
static int32_t index32(reader *r, size_t at, size_t n)
{
    if (n >= INT32_MAX)
        UNSUPPORTED(r, at, "more memoized values than the reader indexes");
    return (int32_t)n;
}

/* a value kept in reader.wide */
static memo_e wide_entry(reader *r, size_t at, const slot *s)
{
    r->wide = grow(r, r->wide, &r->wide_cap, r->nwide + 1, sizeof(int64_t));
    r->wide[r->nwide] = s->i;
    int32_t k = index32(r, at, r->nwide++);
    return me_make(s->type, 0, s->flags & (F_FITS | F_UNSIGNED), k) | ME_WIDE;
}

/* a container's entry: a GET / DUP memoized again (the same contents), an extras object, or
 * an open container (its stack index; its id goes in at drop()) */
static memo_e container_entry(reader *r, size_t at, slot *s, uint64_t idx)
{
    if (s->alias && !s->obj)
        return me_make(s->type, s->role, (s->flags & F_FINAL) | F_ALIASED, s->flags & F_FINAL ? s->sid : -1);
    if (s->role == R_EXTRA && s->obj) {
        r->objs = grow(r, r->objs, &r->objs_cap, r->nobjs + 1, sizeof(PyObject *));
        Py_INCREF(s->obj);
        r->objs[r->nobjs] = s->obj;
        return me_make(s->type, s->role, F_FINAL, index32(r, at, r->nobjs++));
    }
    size_t i = (size_t)(s - r->st);
    if (s->memo >= 0 && (uint64_t)s->memo != idx && (size_t)s->memo < r->nmemo && me_open_at(r->memo[s->memo], i))
        UNSUPPORTED(r, at, "a dict or list memoized twice");
    s->memo = (int64_t)idx;
    int flags = F_OPEN | (s->role == R_FRAME && s->sid >= 0 ? F_FINAL : 0);
    return me_make(s->type, s->role, flags, index32(r, at, i));
}

static memo_e entry_of(reader *r, size_t at, slot *s, uint64_t idx)
{
    switch (s->type) {
    case T_STR: case T_BYTES: payload:
        if (s->off >> ME_OFF_BITS)
            UNSUPPORTED(r, at, "a file too large for the memo");
        return (memo_e)(s->type == T_INT ? ME_BIGINT : s->type) | (uint64_t)(s->hdr & 3) << 4 |
               (uint64_t)(s->key & 31) << 6 | (uint64_t)s->off << 11;
    case T_INT:
        if (!(s->flags & F_FITS))
            goto payload;
        if ((s->flags & F_UNSIGNED) || s->i < INT32_MIN || s->i > INT32_MAX)
            return wide_entry(r, at, s);
        return me_make(T_INT, 0, s->flags & F_FITS, (int32_t)s->i);
    case T_FLOAT: return wide_entry(r, at, s);
    case T_BOOL: return me_make(T_BOOL, 0, 0, (int32_t)s->i);
    case T_TUPLE: {
        int flags = s->flags & (F_HASHABLE | F_PAIR | F_EXACT);
        if (!(s->flags & F_PAIR))
            return me_make(T_TUPLE, 0, flags, -1);
        r->pairs = grow(r, r->pairs, &r->pairs_cap, 2 * r->npairs + 2, sizeof(int64_t));
        r->pairs[2 * r->npairs] = s->v[0];
        r->pairs[2 * r->npairs + 1] = s->v[1];
        return me_make(T_TUPLE, 0, flags, index32(r, at, r->npairs++));
    }
    case T_DICT: case T_LIST: return container_entry(r, at, s, idx);
    default: return me_make(s->type, 0, 0, 0); /* T_NONE */
    }
}

void sr_memo_put(reader *r, size_t at, uint64_t idx)
{
    if (above_fence(r) < 1)
        sr_fail(r, E_ERROR, at, "the pickle's stack underflows");
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
            r->memo[i] = ME_EMPTY;
        r->nmemo = idx + 1;
    }
    slot *s = &r->st[r->nst - 1];
    r->memo[idx] = entry_of(r, at, s, idx);
}

/* a memoized string / bytes / big int: its payload offset and length */
static void payload_of(reader *r, memo_e e, slot *s)
{
    static const int HDR[3] = {1, 4, 8};
    s->hdr = (uint8_t)(e >> 4 & 3);
    s->key = (uint8_t)(e >> 6 & 31);
    s->off = (size_t)(e >> 11);
    if (s->hdr == 3) { /* INT text: up to the newline */
        const uint8_t *nl = memchr(r->buf + s->off, '\n', r->len - s->off);
        s->len = (size_t)(nl - (r->buf + s->off));
    } else
        s->len = (size_t)le(r->buf + s->off - HDR[s->hdr], HDR[s->hdr]);
}

/* a frame dict / frame list referenced while it is still open (a recursive stack repeats a
 * frame; a block's frames may be its segment's): its value as it stands, in its slot o.
 * Changing it afterwards is refused (check_mutable). */
static void settle(reader *r, memo_e *m, slot *o)
{
    if (me_role(*m) == R_FRAME)
        o->sid = sn_frame(&r->out, (int32_t)o->v[0], o->v[1], (int32_t)o->v[2]);
    else if ((size_t)(o->start + o->n) == r->nscratch)
        o->sid = (int32_t)sn_stack(&r->out, r->scratch + o->start, (size_t)o->n);
    else
        return;
    *m |= (memo_e)F_FINAL << 8;
}

/* a memoized container pushed again: an alias (its contents are not kept) with its id */
static void get_container(reader *r, memo_e *m, slot *s)
{
    s->alias = 1;
    s->role = (uint8_t)me_role(*m);
    int32_t v = me_val(*m);
    if (me_flags(*m) & F_OPEN) {
        slot *o = &r->st[(uint32_t)v];
        if (!(me_flags(*m) & F_FINAL) && (s->role == R_FRAME || s->role == R_FRAMELIST))
            settle(r, m, o);
        v = o->sid;
    }
    s->flags = me_flags(*m);
    *m |= (memo_e)F_ALIASED << 8;
    if (!(s->flags & F_FINAL))
        s->flags &= (uint8_t)~F_FINAL, s->sid = -1;
    else if (s->role == R_EXTRA) {
        s->obj = r->objs[v];
        Py_INCREF(s->obj);
    } else
        s->sid = v;
}

void sr_memo_get(reader *r, size_t at, uint64_t idx)
{
    if (idx >= r->nmemo || me_type(r->memo[idx]) == ME_EMPTY)
        sr_fail(r, E_ERROR, at, "the pickle refers to memo entry %llu, which was never stored",
             (unsigned long long)idx);
    memo_e *m = &r->memo[idx];
    memo_e e = *m;
    int type = me_type(e);
    slot *s = push(r, type == ME_BIGINT ? T_INT : type);
    s->i = 0;
    switch (type) {
    case T_STR: case T_BYTES: case ME_BIGINT: payload_of(r, e, s); return;
    case T_DICT: case T_LIST: get_container(r, m, s); return;
    }
    s->flags = me_flags(e);
    if (e & ME_WIDE)
        s->i = r->wide[(uint32_t)me_val(e)];
    else if (type == T_TUPLE) {
        int32_t k = me_val(e);
        if (k >= 0)
            s->v[0] = r->pairs[2 * (size_t)k], s->v[1] = r->pairs[2 * (size_t)k + 1];
    } else
        s->i = me_val(e);
}

/* the container in slot s leaves the stack: its open entry gets its id (or none) */
void sr_memo_close(reader *r, slot *s)
{
    if ((size_t)s->memo >= r->nmemo)
        return;
    memo_e *m = &r->memo[s->memo];
    if (!me_open_at(*m, (size_t)(s - r->st)))
        return;
    int final = me_flags(*m) & F_FINAL;
    *m = me_set_val(*m & ~((memo_e)F_OPEN << 8), final ? s->sid : -1);
}
