/* tb_profiler._native: the Python face of the decoder.
 *
 *   decode(buf) -> dict      buf: a writable bytes-like object holding the JSON text
 *   DecodeError(ValueError)  args (message, byte_offset)
 *   Buffer                   a bytes-like object owning one decoded column (zero copy
 *                            for numpy.frombuffer)
 *   DENSE_COLUMNS, SPARSE_COLUMNS   ((name, struct format letter), ...) in schema order
 *
 * The parse runs without the GIL on plain C structures; Python objects are only made at
 * the end, each column handing its malloc'd block to a Buffer without a copy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "decoder.h"
#include "nesting.h"
#include "snapshot.h"

/* ------------------------------------------------------------------ Buffer */

typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t len;
} BufferObject;

static void Buffer_dealloc(BufferObject *self)
{
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->len, 0, flags);
}

static Py_ssize_t Buffer_length(BufferObject *self)
{
    return self->len;
}

static PyBufferProcs Buffer_as_buffer = {(getbufferproc)Buffer_getbuffer, NULL};
static PySequenceMethods Buffer_as_sequence = {.sq_length = (lenfunc)Buffer_length};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tb_profiler._native.Buffer",
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)Buffer_dealloc,
    .tp_as_buffer = &Buffer_as_buffer,
    .tp_as_sequence = &Buffer_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded column: a writable bytes-like block of memory (use numpy.frombuffer).",
};

/* Wraps *data (nbytes long) in a Buffer, taking ownership: *data is set to NULL, and is
 * freed here if the wrapper cannot be made. The block is first trimmed to its size. */
static PyObject *buffer_take(void **data, size_t nbytes)
{
    void *p = *data;
    *data = NULL;
    void *trimmed = realloc(p, nbytes ? nbytes : 1);
    if (trimmed)
        p = trimmed;
    else if (!p)
        return PyErr_NoMemory();
    BufferObject *b = PyObject_New(BufferObject, &BufferType);
    if (!b) {
        free(p);
        return NULL;
    }
    b->data = p;
    b->len = (Py_ssize_t)nbytes;
    return (PyObject *)b;
}

/* buffer_take for snapshot.c (snapshot.h) */
PyObject *tb_buffer_take(void **data, size_t nbytes)
{
    return buffer_take(data, nbytes);
}

/* ------------------------------------------------------------------ results */

static PyObject *DecodeError;

static PyObject *utf8_str(const uint8_t *p, size_t n, int ascii)
{
    if (ascii) {
        /* known ASCII: skip the decoder's scan */
        PyObject *u = PyUnicode_New((Py_ssize_t)n, 127);
        if (u)
            memcpy(PyUnicode_DATA(u), p, n);
        return u;
    }
    return PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, "strict");
}

/* dict.__setitem__ that steals the value reference. */
static int set_steal(PyObject *dict, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *dense_dict(tb_decoder *d)
{
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    tb_colref refs[TB_NDENSE];
    tb_dense_refs(&d->dense, refs);
    for (int i = 0; i < TB_NDENSE; i++) {
        if (set_steal(out, refs[i].name, buffer_take(refs[i].data, d->dense.n * refs[i].itemsize)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *sparse_dict(tb_decoder *d)
{
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    for (int i = 0; i < TB_NSPARSE; i++) {
        tb_sparse *c = &d->sparse[i];
        PyObject *rows = buffer_take((void **)&c->rows, c->n * sizeof(int32_t));
        PyObject *vals = buffer_take((void **)&c->vals, c->n * c->itemsize);
        PyObject *pair = (rows && vals) ? PyTuple_Pack(2, rows, vals) : NULL;
        Py_XDECREF(rows);
        Py_XDECREF(vals);
        if (set_steal(out, tb_sparse_specs[i].name, pair) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *strings_list(tb_decoder *d)
{
    PyObject *out = PyList_New((Py_ssize_t)d->strings.n);
    if (!out)
        return NULL;
    for (size_t i = 0; i < d->strings.n; i++) {
        size_t n;
        int ascii;
        const uint8_t *p = tb_intern_bytes(&d->strings, i, &n, &ascii);
        PyObject *u = utf8_str(p, n, ascii);
        if (!u) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, u);
    }
    return out;
}

static PyObject *toplevel_dict(tb_decoder *d)
{
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    for (size_t i = 0; i < d->ntop; i++) {
        const tb_topentry *e = &d->top[i];
        PyObject *k = utf8_str(e->key, e->klen, 0);
        PyObject *v = utf8_str(e->val, e->vlen, 0);
        int rc = (k && v) ? PyDict_SetItem(out, k, v) : -1; /* a repeated key: last wins */
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *build_result(tb_decoder *d, size_t blob_len)
{
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    if (set_steal(out, "dense", dense_dict(d)) < 0 || set_steal(out, "sparse", sparse_dict(d)) < 0 ||
        set_steal(out, "strings", strings_list(d)) < 0 || set_steal(out, "toplevel", toplevel_dict(d)) < 0 ||
        set_steal(out, "args_blob_len", PyLong_FromSize_t(blob_len)) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static void raise_error(const tb_decoder *d)
{
    const tb_scanner *s = &d->sc;
    if (s->err_kind == TB_ERR_NOMEM) {
        PyErr_NoMemory();
        return;
    }
    PyObject *args = Py_BuildValue("(sn)", s->err_msg ? s->err_msg : "malformed trace", (Py_ssize_t)s->err_off);
    if (args) {
        PyErr_SetObject(DecodeError, args);
        Py_DECREF(args);
    }
}

/* ------------------------------------------------------------------ module */

PyDoc_STRVAR(decode_doc,
             "decode(buf, threads=1, min_part=8 MiB, keep_input=False, progress=None) -> dict\n\n"
             "Decode the JSON text of a Kineto/Chrome trace held in the writable buffer buf\n"
             "(e.g. a bytearray) into columns, the events array split between up to `threads`\n"
             "threads of at least `min_part` bytes each (the result is the same for any split).\n"
             "buf is overwritten: on return, buf[:args_blob_len]\n"
             "holds every event's args text (args_off/args_len address it), and the memory of\n"
             "the rest is given back to the OS (it reads as zeros).\n"
             "keep_input=True: buf (any buffer, read-only too) is only read; args_off addresses\n"
             "the args text where it lies in buf, and args_blob_len is len(buf).\n"
             "progress: a writable int64 buffer of PROGRESS_SLOTS items, zeroed; while this runs\n"
             "(without the GIL) its sum is the events text walked so far, in bytes (from several\n"
             "threads, it can briefly count some text twice: clamp it to len(buf)).\n"
             "Returns {'dense': {col: Buffer}, 'sparse': {col: (rows Buffer, values Buffer)},\n"
             "'strings': [str], 'toplevel': {key: raw JSON text}, 'args_blob_len': int}.\n"
             "Raises DecodeError(message, byte_offset) for malformed input.");

/* After decoding, only buf[:w] (the args blob) is still wanted. A bytearray cannot give
 * its tail back to the allocator when shrunk by less than half, so hand the whole pages
 * past the blob back to the kernel directly (they read as zeros if touched again). Only
 * pages entirely inside the buffer are affected, so this is safe whatever allocated it. */
static void release_tail(uint8_t *buf, size_t w, size_t len)
{
#if defined(__linux__) && defined(MADV_DONTNEED)
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t lo = ((uintptr_t)(buf + w) + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = (uintptr_t)(buf + len) & ~((uintptr_t)page - 1);
    if (hi > lo && hi - lo >= ((uintptr_t)1 << 20)) /* not worth a syscall below 1 MB */
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)buf;
    (void)w;
    (void)len;
#endif
}

/* The progress buffer: writable, C-contiguous int64 with a slot per decoder part. */
static int progress_view(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != 8 || !view->format || strchr("qlQL", view->format[0]) == NULL ||
        view->len < TB_PROGRESS_SLOTS * 8 || ((uintptr_t)view->buf & 7)) {
        PyErr_Format(PyExc_ValueError, "decode: progress must be an aligned int64 buffer of at least %d items",
                     TB_PROGRESS_SLOTS);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *native_decode(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"buf", "threads", "min_part", "keep_input", "progress", NULL};
    PyObject *arg, *progress = Py_None;
    int threads = 1, keep_input = 0;
    Py_ssize_t min_part = (Py_ssize_t)8 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|inpO:decode", kwlist, &arg, &threads, &min_part,
                                     &keep_input, &progress))
        return NULL;
    if (min_part < 1) {
        PyErr_SetString(PyExc_ValueError, "decode: min_part must be at least 1");
        return NULL;
    }
    Py_buffer view, pview = {0};
    if (PyObject_GetBuffer(arg, &view, keep_input ? PyBUF_SIMPLE : PyBUF_WRITABLE) < 0)
        return NULL;
    if (progress != Py_None && progress_view(progress, &pview) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    tb_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        PyBuffer_Release(&view);
        if (pview.obj)
            PyBuffer_Release(&pview);
        return PyErr_NoMemory();
    }
    d->threads = threads;
    d->min_part = (size_t)min_part;
    d->keep_input = keep_input != 0;
    d->progress = pview.obj ? (int64_t *)pview.buf : NULL;
    int rc;
    /* the buffer export keeps a bytearray from being resized while we run unlocked; with
     * keep_input the decoder only reads buf (the cast drops a const it honours) */
    Py_BEGIN_ALLOW_THREADS
    rc = tb_decode(d, (uint8_t *)view.buf, (size_t)view.len);
    if (rc == 0 && !keep_input)
        release_tail((uint8_t *)view.buf, d->w, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc)
        raise_error(d);
    else
        result = build_result(d, keep_input ? (size_t)view.len : d->w);
    tb_decoder_free(d);
    free(d);
    PyBuffer_Release(&view);
    if (pview.obj)
        PyBuffer_Release(&pview);
    return result;
}

/* ------------------------------------------------------------------ nest_parents */

PyDoc_STRVAR(nest_parents_doc,
             "nest_parents(group, start, end, parent)\n\n"
             "int64 buffers of equal length, sorted by (group, start, end descending); fills the\n"
             "writable parent buffer with each event's innermost enclosing event index, or -1.");

static int int64_view(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t n, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != 8 || (n >= 0 && view->len != n * 8)) {
        PyErr_Format(PyExc_ValueError, "%s must be int64 of the same length", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *native_nest_parents(PyObject *module, PyObject *args)
{
    PyObject *g, *s, *e, *p;
    if (!PyArg_ParseTuple(args, "OOOO:nest_parents", &g, &s, &e, &p))
        return NULL;
    Py_buffer vg, vs, ve, vp;
    if (int64_view(g, &vg, 0, -1, "group") < 0)
        return NULL;
    Py_ssize_t n = vg.len / 8;
    if (int64_view(s, &vs, 0, n, "start") < 0)
        goto fail_g;
    if (int64_view(e, &ve, 0, n, "end") < 0)
        goto fail_s;
    if (int64_view(p, &vp, 1, n, "parent") < 0)
        goto fail_e;
    int64_t *stack = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!stack) {
        PyErr_NoMemory();
        goto fail_p;
    }
    Py_BEGIN_ALLOW_THREADS
    tb_nest_parents(vg.buf, vs.buf, ve.buf, n, vp.buf, stack);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(stack);
    PyBuffer_Release(&vp);
    PyBuffer_Release(&ve);
    PyBuffer_Release(&vs);
    PyBuffer_Release(&vg);
    Py_RETURN_NONE;
fail_p:
    PyBuffer_Release(&vp);
fail_e:
    PyBuffer_Release(&ve);
fail_s:
    PyBuffer_Release(&vs);
fail_g:
    PyBuffer_Release(&vg);
    return NULL;
}

PyDoc_STRVAR(subtree_add_doc,
             "subtree_add(order, parent, total)\n\n"
             "int64 buffers; parent and total of one length n, order of indexes into them with every\n"
             "child before its parent: total[parent[k]] += total[k] for k in order (parent -1: a\n"
             "root), in that order. Why here: numpy adds a level at a time, and a chain nested 10^6\n"
             "deep has 10^6 levels. ValueError for an index out of range.");

static PyObject *native_subtree_add(PyObject *module, PyObject *args)
{
    PyObject *o, *p, *t;
    if (!PyArg_ParseTuple(args, "OOO:subtree_add", &o, &p, &t))
        return NULL;
    Py_buffer vo, vp, vt;
    if (int64_view(o, &vo, 0, -1, "order") < 0)
        return NULL;
    if (int64_view(p, &vp, 0, -1, "parent") < 0) {
        PyBuffer_Release(&vo);
        return NULL;
    }
    Py_ssize_t n = vp.len / 8;
    if (int64_view(t, &vt, 1, n, "total") < 0) {
        PyBuffer_Release(&vp);
        PyBuffer_Release(&vo);
        return NULL;
    }
    int64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = tb_subtree_add(vo.buf, (int64_t)(vo.len / 8), vp.buf, vt.buf, (int64_t)n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vt);
    PyBuffer_Release(&vp);
    PyBuffer_Release(&vo);
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, "subtree_add: index out of range at order[%lld]", (long long)bad);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"decode", (PyCFunction)(void (*)(void))native_decode, METH_VARARGS | METH_KEYWORDS, decode_doc},
    {"nest_parents", native_nest_parents, METH_VARARGS, nest_parents_doc},
    {"subtree_add", native_subtree_add, METH_VARARGS, subtree_add_doc},
    {"read_snapshot", tb_read_snapshot, METH_VARARGS, tb_read_snapshot_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "tb_profiler._native", "The native trace decoder (see tb_profiler.decode).", -1,
    native_methods, NULL, NULL, NULL, NULL,
};

static PyObject *column_table(void)
{
    tb_dense dummy = {0};
    tb_colref refs[TB_NDENSE];
    tb_dense_refs(&dummy, refs);
    PyObject *dense = PyTuple_New(TB_NDENSE);
    if (!dense)
        return NULL;
    for (int i = 0; i < TB_NDENSE; i++) {
        PyObject *item = Py_BuildValue("(sC)", refs[i].name, refs[i].format);
        if (!item) {
            Py_DECREF(dense);
            return NULL;
        }
        PyTuple_SET_ITEM(dense, i, item);
    }
    return dense;
}

static PyObject *sparse_table(void)
{
    PyObject *sparse = PyTuple_New(TB_NSPARSE);
    if (!sparse)
        return NULL;
    for (int i = 0; i < TB_NSPARSE; i++) {
        PyObject *item = Py_BuildValue("(sC)", tb_sparse_specs[i].name, tb_sparse_specs[i].format);
        if (!item) {
            Py_DECREF(sparse);
            return NULL;
        }
        PyTuple_SET_ITEM(sparse, i, item);
    }
    return sparse;
}

PyMODINIT_FUNC PyInit__native(void)
{
    if (!tb_decoder_global_init()) {
        PyErr_SetString(PyExc_ImportError, "tb_profiler._native: decoder tables failed to initialise");
        return NULL;
    }
    if (PyType_Ready(&BufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    DecodeError = PyErr_NewExceptionWithDoc("tb_profiler._native.DecodeError",
                                            "Malformed trace JSON: args are (message, byte_offset).",
                                            PyExc_ValueError, NULL);
    Py_INCREF(&BufferType);
    if (!DecodeError || PyModule_AddObject(m, "DecodeError", DecodeError) < 0 ||
        PyModule_AddObject(m, "Buffer", (PyObject *)&BufferType) < 0 ||
        PyModule_AddObject(m, "DENSE_COLUMNS", column_table()) < 0 ||
        PyModule_AddObject(m, "SPARSE_COLUMNS", sparse_table()) < 0 ||
        PyModule_AddIntConstant(m, "PROGRESS_SLOTS", TB_PROGRESS_SLOTS) < 0 ||
        PyModule_AddIntConstant(m, "STRING_MAX", (long)TB_STRING_MAX) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(DecodeError); /* the module's reference was stolen; keep ours */
    return m;
}
