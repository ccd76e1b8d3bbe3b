/* The streaming snapshot reader's attaching: a value put in a dict (SETITEM(S)) or a list
 * (APPEND(S)) checks the role guessed for it and becomes a field of its schema record, a
 * row of a table, a frame of a stack, or a Python object of allocator_settings /
 * external_annotations. */
#include "snapshot_reader.h"

#include <string.h>

static const char *const ACTIONS[] = {"alloc", "free_requested", "free_completed", "segment_alloc",
                                      "segment_free", "segment_map", "segment_unmap", "snapshot", "oom"};
static const char *const STATES[] = {"active_allocated", "active_pending_free", "inactive"};

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
    if (d->alias || (d->memo >= 0 && (size_t)d->memo < r->nmemo && (me_flags(r->memo[d->memo]) & F_ALIASED) &&
                     me_open_at(r->memo[d->memo], (size_t)(d - r->st))))
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
    v->sid = (int32_t)id; /* drop() writes it into the memo entry */
    if (v->memo >= 0 && (size_t)v->memo < r->nmemo && me_open_at(r->memo[v->memo], (size_t)(v - r->st)))
        r->memo[v->memo] |= (memo_e)F_FINAL << 8;
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
                UNSUPPORTED(r, at, "'%s' repeated, shared or not a list", SR_KEYS[key]);
            *seen = 1;
            if (key == K_DEVICE_TRACES)
                r->n_devices = v->n;
        } else if (key == K_ALLOCATOR_SETTINGS || key == K_EXTERNAL_ANNOTATIONS) {
            PyObject *o = r->extra_items > EXTRA_LIMIT ? (Py_INCREF(Py_None), Py_None) : to_py(r, v, at);
            if (!o || PyDict_SetItemString(r->extras, SR_KEYS[key], o) < 0) {
                Py_XDECREF(o);
                sr_fail(r, E_OOM, at, "cannot keep %s", SR_KEYS[key]);
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
    if (f->memo >= 0 && (size_t)f->memo < r->nmemo && me_open_at(r->memo[f->memo], (size_t)(f - r->st)))
        r->memo[f->memo] |= (memo_e)F_FINAL << 8; /* the id stays in the slot until drop() */
}

void sr_setitem(reader *r, size_t at, slot *d, slot *k, slot *v)
{
    if (d->type != T_DICT)
        UNSUPPORTED(r, at, "SETITEM on something other than a dict");
    if (!hashable(k))
        UNSUPPORTED(r, at, "an unhashable dict key");
    check_mutable(r, at, d);
    int expected = (v->type == T_DICT || v->type == T_LIST) ? sr_child_role(d, k, v->type) : R_NONE;
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

void sr_append(reader *r, size_t at, slot *l, slot *v)
{
    if (l->type != T_LIST)
        UNSUPPORTED(r, at, "APPEND on something other than a list");
    check_mutable(r, at, l);
    int expected = (v->type == T_DICT || v->type == T_LIST) ? sr_child_role(l, NULL, v->type) : R_NONE;
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
            sr_fail(r, E_OOM, at, "out of memory");
        return;
    }
    write_row(r, at, l, v);
    l->n++;
}

