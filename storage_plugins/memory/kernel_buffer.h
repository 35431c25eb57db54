/* What every kernel of this folder shares: taking a numpy array (or any
   buffer) in as a C-contiguous 1-d buffer of fixed-size items.

   Included by each kernel's .c; core/hotpath.py hashes it with them, so an
   edited header makes their build stale as an edited .c does. */

#ifndef DEJAQ_KERNEL_BUFFER_H
#define DEJAQ_KERNEL_BUFFER_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* `obj` as a C-contiguous 1-d buffer of `size`-byte items; `flags` adds to
   the request (PyBUF_WRITABLE for an array written in place). */
static int
take(PyObject *obj, Py_buffer *view, Py_ssize_t size, int flags, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | flags) < 0) {
        return -1;
    }
    if (view->itemsize != size || view->ndim != 1) {
        PyErr_Format(PyExc_TypeError, "%s: a 1-d array of %zd-byte items is needed", what, size);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* How many items a taken buffer holds. */
static inline Py_ssize_t
items(Py_buffer *view)
{
    return view->len / view->itemsize;
}

#endif
