/* The streaming snapshot reader's input checks (UTF-8, the schema's keys), the stack's MARKs
 * and the role a dict / list gets when it is pushed, guessed from where it sits (snapshot.c
 * says why a guess, and how it is checked). */
#include "snapshot_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const SR_KEYS[K_COUNT] = {
    "", "segments", "device_traces", "allocator_settings", "external_annotations", "device", "address",
    "total_size", "allocated_size", "active_size", "requested_size", "stream", "segment_type",
    "segment_pool_id", "is_expandable", "frames", "blocks", "size", "state", "action", "addr", "time_us",
    "device_free", "compile_context", "user_metadata", "filename", "line", "name"};

void sr_fail(reader *r, int kind, size_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->kind = kind;
    r->err_off = off;
    siglongjmp(r->jb, 1);
}

/* Python's UTF-8 decoder with "surrogatepass" (what pickle uses for str) */
int sr_utf8_ok(const uint8_t *s, size_t n)
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

int sr_key_of(const uint8_t *p, size_t n)
{
    if (n < 4 || n > 22)
        return K_NONE;
    for (int k = 1; k < K_COUNT; k++)
        if (strlen(SR_KEYS[k]) == n && memcmp(SR_KEYS[k], p, n) == 0)
            return k;
    return K_NONE;
}

void sr_push_mark(reader *r)
{
    r->marks = grow(r, r->marks, &r->marks_cap, r->nmarks + 1, sizeof(size_t));
    r->marks[r->nmarks++] = r->nst;
    push(r, T_MARK);
}

static int accepts(int role, int type)
{
    switch (role) {
    case R_SEGLIST: case R_BLOCKLIST: case R_ENTRYLIST: case R_FRAMELIST: return type == T_DICT;
    case R_DTLIST: return type == T_LIST;
    default: return 1;
    }
}

/* the role of a dict / list of `type` put in container p (under key, for a dict) */
int sr_child_role(const slot *p, const slot *key, int type)
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
            return sr_child_role(s, NULL, type);
        }
        slot *d = top - 1 > m ? &r->st[top - 1] : NULL;
        if (d && d->type == T_DICT && s->type == T_STR && single_form_candidate(d)) {
            *parent = top - 1;
            return sr_child_role(d, s, type);
        }
    }
    if (m >= 0) {
        slot *p = m > 0 ? &r->st[m - 1] : NULL;
        if (!p || (p->type != T_DICT && p->type != T_LIST))
            return R_IGNORE; /* a tuple's items */
        *parent = m - 1;
        if (p->type == T_DICT)
            return (top - m) % 2 ? sr_child_role(p, &r->st[top], type) : R_IGNORE;
        return sr_child_role(p, NULL, type);
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

void sr_push_container(reader *r, size_t at, int type)
{
    int64_t parent;
    int role = guess_role(r, type, &parent);
    slot *s = push(r, type);
    s->role = (uint8_t)role;
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
            sr_fail(r, E_OOM, at, "out of memory");
        break;
    }
}

