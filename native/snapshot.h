/* tb_profiler._native.read_snapshot: the streaming memory-snapshot reader (snapshot.c). */
#ifndef TB_SNAPSHOT_H
#define TB_SNAPSHOT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *tb_read_snapshot(PyObject *self, PyObject *args);
extern const char tb_read_snapshot_doc[];

/* module.c: wraps a malloc'd block in a Buffer (zero copy), taking ownership */
PyObject *tb_buffer_take(void **data, size_t nbytes);

#endif
