/* The streaming memory-snapshot reader: one pass over a snapshot pickle's opcodes into the
 * columns of tb_profiler/decode/snapshot_schema.py (snapshot_tables.c holds the output;
 * snapshot_reader.h lists the other parts: roles, attaching, memo). This file: the opcode
 * loop and the Python entry point.
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
 * Memory: no Python object per entry. The memo keeps 8 bytes per memoized object (a
 * string is found again by its opcode's offset); completed entries wait on the value stack
 * only until their batch's APPENDS (1000 at most). allocator_settings and
 * external_annotations (small) are built as Python objects. Holds the GIL. */
#include "snapshot_reader.h"

#include <stdlib.h>
#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define SR_MMAP 1
#endif

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
        sr_fail(r, E_ERROR, r->len, "the pickle is truncated (a string runs past its end)");
    const uint8_t *p = take(r, (size_t)n);
    if (type == T_STR && !sr_utf8_ok(p, (size_t)n))
        sr_fail(r, E_ERROR, at, "a string is not valid UTF-8");
    slot *s = push(r, type);
    s->off = (size_t)(p - r->buf);
    s->len = (size_t)n;
    s->hdr = (uint8_t)hdr;
    if (type == T_STR)
        s->key = (uint8_t)sr_key_of(p, (size_t)n);
}

/* the decimal text of INT / PUT / GET up to its newline (plain digits, as the reference
 * reader requires); *neg set for a leading minus (INT only) */
static const uint8_t *decimal_line(reader *r, size_t at, int allow_minus, size_t *len)
{
    const uint8_t *p = r->buf + r->pos;
    const uint8_t *nl = memchr(p, '\n', r->len - r->pos);
    if (!nl)
        sr_fail(r, E_ERROR, r->len, "the pickle is truncated (a line without its newline)");
    size_t n = (size_t)(nl - p), i = allow_minus && n && p[0] == '-';
    if (n == i || n - i > 18)
        sr_fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
    size_t d0 = i;
    for (; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            sr_fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
    /* INT's text is read by strtol(base 0): a leading zero is octal, so only 0, 00, 01 */
    if (allow_minus && p[d0] == '0' && n - d0 > 1 && !(d0 == 0 && n == 2 && p[1] <= '1'))
        sr_fail(r, E_ERROR, at, "a text opcode's number is not plain decimal");
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
        sr_fail(r, E_ERROR, at, "the pickle has no MARK where one is needed");
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

#define RELEASE_STEP ((size_t)64 << 20) /* let go of the mapping behind the read this often, keeping */
                                        /* a quarter of it behind the read position */

/* a mapped file's pages behind the read position go back to the page cache, so the peak
 * memory does not grow with the file (a memo GET of an old string faults its page in again) */
static void release_behind(reader *r)
{
#ifdef SR_MMAP
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t end = (r->pos - r->release_step / 4) / page * page;
    if (end > r->released) {
        madvise((void *)(r->buf + r->released), end - r->released, MADV_DONTNEED);
        r->released = end;
    }
#endif
}

/* returns at STOP with the snapshot dict on top */
static void run(reader *r)
{
    size_t frame_end = 0, at = 0;
    for (;; ) {
        /* frames as pickle's spec has them: no opcode straddles a frame's end */
        if (at < frame_end && r->pos > frame_end)
            sr_fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
        at = r->pos;
        if (r->mapped && r->pos - r->released > r->release_step)
            release_behind(r);
        uint8_t op = *take(r, 1);
        size_t n, first;
        switch (op) {
        case 0x80: /* PROTO */
            if (*take(r, 1) > 5)
                sr_fail(r, E_ERROR, at, "unsupported pickle protocol %d", r->buf[at + 1]);
            break;
        case 0x95: /* FRAME */
            if (at < frame_end)
                sr_fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
            n = (size_t)le(take(r, 8), 8);
            if (n > r->len - r->pos)
                sr_fail(r, E_ERROR, r->len, "the pickle is truncated (a frame runs past its end)");
            frame_end = r->pos + n;
            break;
        case '}': sr_push_container(r, at, T_DICT); break;
        case ']': sr_push_container(r, at, T_LIST); break;
        case ')': op_tuple(r, at, r->nst, 0, 0); break;
        case '(': sr_push_mark(r); break;
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
            sr_setitem(r, at, &r->st[r->nst - 3], &r->st[r->nst - 2], &r->st[r->nst - 1]);
            drop(r);
            drop(r);
            break;
        case 'u': /* SETITEMS */
            first = mark_items(r, at, &n);
            if (n % 2)
                sr_fail(r, E_ERROR, at, "odd number of items for SETITEMS");
            if (first < 2 || r->st[first - 2].type == T_MARK)
                sr_fail(r, E_ERROR, at, "the pickle's stack underflows");
            for (size_t i = first; i < r->nst; i += 2)
                sr_setitem(r, at, &r->st[first - 2], &r->st[i], &r->st[i + 1]);
            while (r->nst > first)
                drop(r);
            pop_mark(r);
            break;
        case 'a': /* APPEND */
            need_items(r, at, 2);
            sr_append(r, at, &r->st[r->nst - 2], &r->st[r->nst - 1]);
            drop(r);
            break;
        case 'e': /* APPENDS */
            first = mark_items(r, at, &n);
            if (first < 2 || r->st[first - 2].type == T_MARK)
                sr_fail(r, E_ERROR, at, "the pickle's stack underflows");
            for (size_t i = first; i < r->nst; i++)
                sr_append(r, at, &r->st[first - 2], &r->st[i]);
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
                sr_fail(r, E_ERROR, at, "LONG pickle has negative byte count");
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
        case 0x94: sr_memo_put(r, at, r->nmemo); break;
        case 'q': sr_memo_put(r, at, *take(r, 1)); break;
        case 'r': sr_memo_put(r, at, le(take(r, 4), 4)); break;
        case 'p': { const uint8_t *p = decimal_line(r, at + 1, 0, &n); sr_memo_put(r, at, (uint64_t)parse_dec(p, n)); break; }
        case 'h': sr_memo_get(r, at, *take(r, 1)); break;
        case 'j': sr_memo_get(r, at, le(take(r, 4), 4)); break;
        case 'g': { const uint8_t *p = decimal_line(r, at + 1, 0, &n); sr_memo_get(r, at, (uint64_t)parse_dec(p, n)); break; }
        case '.': /* STOP */
            if (at < frame_end && r->pos > frame_end)
                sr_fail(r, E_ERROR, at, "an opcode crosses the end of its frame");
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
                    sr_fail(r, E_ERROR, at, "the pickle uses the opcode %s, which could run code or build something "
                         "other than plain dicts, lists, strings and numbers", FORBIDDEN[i].name);
            sr_fail(r, E_ERROR, at, "damaged pickle (unknown opcode 0x%02x)", op);
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
    free(r->wide);
    for (size_t i = 0; i < r->nobjs; i++)
        Py_DECREF(r->objs[i]);
    free(r->objs);
    free(r->scratch);
    Py_XDECREF(r->extras);
    sn_out_free(&r->out);
}

const char tb_read_snapshot_doc[] =
    "read_snapshot(buf_or_path[, release_step]) -> dict: the columns of a memory-snapshot pickle held\n"
    "in buf (bytes-like), or in the uncompressed file at path (a str: mapped, not copied; its pages go\n"
    "back to the page cache behind the read, every release_step bytes). Raises ValueError(kind,\n"
    "message, byte_offset): kind 1 damaged or refused, 3 a layout the streaming reader does not follow\n"
    "(the reference reader may read it); OSError when the file cannot be opened or mapped.";

/* A SIGBUS while the input is read: a mapped file (ours, or a Python mmap passed as the
 * buffer) was truncated under the reader. SIGBUS from a memory access goes to the thread
 * that made it, so the handler finds that thread's read (thread-local) and jumps to its
 * error path: an error naming the byte offset, where the process would have been killed.
 * Any other SIGBUS goes to the handler that was there before (faulthandler, the default). */
#ifdef SR_MMAP
static __thread reader *volatile sr_bus_reader;
static struct sigaction sr_bus_prev;

static void sr_bus_handler(int sig, siginfo_t *info, void *ctx)
{
    reader *r = sr_bus_reader;
    const uint8_t *at = info ? (const uint8_t *)info->si_addr : NULL;
    if (r && at >= r->buf && at < r->buf + r->len) {
        sr_bus_reader = NULL;
        r->kind = E_ERROR;
        r->err_off = (size_t)(at - r->buf);
        snprintf(r->msg, sizeof r->msg, "the file was cut short (truncated or rewritten) while it was read");
        siglongjmp(r->jb, 1);
    }
    if (sr_bus_prev.sa_flags & SA_SIGINFO) {
        if (sr_bus_prev.sa_sigaction)
            sr_bus_prev.sa_sigaction(sig, info, ctx);
        return;
    }
    if (sr_bus_prev.sa_handler == SIG_IGN)
        return;
    if (sr_bus_prev.sa_handler == SIG_DFL || !sr_bus_prev.sa_handler) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    sr_bus_prev.sa_handler(sig);
}

/* ours installed (again, if another handler replaced it since), chaining to the one before */
static void sr_bus_install(void)
{
    struct sigaction now;
    if (sigaction(SIGBUS, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == sr_bus_handler)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = sr_bus_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &sr_bus_prev);
}
#else
static reader *sr_bus_reader;
static void sr_bus_install(void) {}
#endif

static PyObject *read_buffer(const uint8_t *buf, size_t len, size_t release_step)
{
    reader *r = calloc(1, sizeof *r);
    if (!r)
        return PyErr_NoMemory();
    r->buf = buf;
    r->len = len;
    r->mapped = release_step > 0;
    r->release_step = release_step;
    r->memo_max = r->len + 1024;
    sn_out_init(&r->out, &r->jb, r->msg);
    PyObject *res = NULL;
    r->extras = PyDict_New();
    sr_bus_install();
    if (r->extras && sigsetjmp(r->jb, 1) == 0) {
        sr_bus_reader = r;
        run(r);
        sr_bus_reader = NULL;
        res = result(r);
    } else if (r->extras) {
        sr_bus_reader = NULL;
        if (PyErr_Occurred())
            PyErr_Clear();
        PyErr_SetObject(PyExc_ValueError, Py_BuildValue("(isn)", r->kind ? r->kind : E_OOM, r->msg,
                                                        (Py_ssize_t)r->err_off));
    }
    reader_free(r);
    free(r);
    return res;
}

#ifdef SR_MMAP
/* the file at path, mapped read-only (an empty file reads as no bytes) */
static PyObject *read_file(PyObject *path, size_t release_step)
{
    PyObject *enc = NULL;
    if (!PyUnicode_FSConverter(path, &enc))
        return NULL;
    const char *name = PyBytes_AS_STRING(enc);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        if (fd >= 0)
            close(fd);
        Py_DECREF(enc);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (map == MAP_FAILED) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(enc);
        return NULL;
    }
    Py_DECREF(enc);
    if (len)
        madvise(map, len, MADV_SEQUENTIAL);
    PyObject *res = read_buffer(len ? map : (const uint8_t *)"", len, len ? release_step : 0);
    if (len)
        munmap(map, len);
    return res;
}
#endif

PyObject *tb_read_snapshot(PyObject *self, PyObject *args)
{
    PyObject *arg;
    Py_ssize_t step = (Py_ssize_t)RELEASE_STEP; /* tests make it small */
    if (!PyArg_ParseTuple(args, "O|n", &arg, &step))
        return NULL;
    if (step < 4096) {
        PyErr_SetString(PyExc_ValueError, "read_snapshot: release_step must be at least 4096");
        return NULL;
    }
    if (PyUnicode_Check(arg)) {
#ifdef SR_MMAP
        return read_file(arg, (size_t)step);
#else
        PyErr_SetString(PyExc_TypeError, "read_snapshot: a path needs mmap; pass the file's bytes");
        return NULL;
#endif
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *res = read_buffer(view.buf, (size_t)view.len, 0);
    PyBuffer_Release(&view);
    return res;
}
