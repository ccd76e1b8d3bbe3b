/* The streaming snapshot reader's memo (PUT / GET): 16 bytes per memoized object. A string
 * is found again by its opcode's offset, a pair tuple in a side table, a container by its
 * role and, once complete, its frame / stack id. */
#include "snapshot_reader.h"

#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

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

void sr_memo_get(reader *r, size_t at, uint64_t idx)
{
    if (idx >= r->nmemo || r->memo[idx].type == 0xFF)
        sr_fail(r, E_ERROR, at, "the pickle refers to memo entry %llu, which was never stored",
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

