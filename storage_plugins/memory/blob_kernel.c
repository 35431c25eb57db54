/* The per-record loops of Blobs and Columns in C (storage_plugins/memory/
   blobs.py, columns.py): copying a batch's records into their rows, and
   reading a batch's ids and payloads out of them.

   The Python modules keep their loops as the reference and for a build
   without a compiler; here a record costs a memcpy (and, read, its str and
   bytes), not a slice of a memoryview and a few Python ints. A handle is
   chunk << 32 | offset into `chunks`, a list of writable buffers. */

#include "kernel_buffer.h"
#include <stdint.h>

#define OFFSET_BITS 32
#define OFFSET_MASK ((1LL << OFFSET_BITS) - 1)

/* The chunks' buffers, looked up once a chunk while a batch walks them. */
typedef struct {
    PyObject *chunks;
    Py_ssize_t number;
    Py_buffer view;
    int writable;
} Chunk;

static void
chunk_release(Chunk *c)
{
    if (c->number >= 0) {
        PyBuffer_Release(&c->view);
        c->number = -1;
    }
}

/* The bytes [offset, offset + length) of the record at `handle`, or NULL. */
static char *
locate(Chunk *c, int64_t handle, Py_ssize_t length)
{
    Py_ssize_t number = (Py_ssize_t)(handle >> OFFSET_BITS);
    Py_ssize_t offset = (Py_ssize_t)(handle & OFFSET_MASK);
    if (number != c->number) {
        chunk_release(c);
        if (handle < 0 || number >= PyList_GET_SIZE(c->chunks)) {
            PyErr_SetString(PyExc_ValueError, "a handle names no chunk");
            return NULL;
        }
        PyObject *chunk = PyList_GET_ITEM(c->chunks, number);
        int flags = PyBUF_SIMPLE | (c->writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(chunk, &c->view, flags) < 0) {
            return NULL;
        }
        c->number = number;
    }
    if (length < 0 || offset + length > c->view.len) {
        PyErr_SetString(PyExc_ValueError, "a record runs past its chunk");
        return NULL;
    }
    return (char *)c->view.buf + offset;
}

PyDoc_STRVAR(write_doc,
"write(chunks, handles, records)\n\n"
"Copy each of records (bytes) to the row its handle names.");

static PyObject *
blob_write(PyObject *self, PyObject *args)
{
    PyObject *chunks, *o_handles, *records;
    Py_buffer handles;
    if (!PyArg_ParseTuple(args, "O!OO!", &PyList_Type, &chunks, &o_handles, &PyList_Type, &records)) {
        return NULL;
    }
    if (take(o_handles, &handles, 8, 0, "handles") < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    Chunk c = {chunks, -1, {0}, 1};
    if (items(&handles) != n) {
        PyErr_SetString(PyExc_ValueError, "handles: one a record is needed");
        goto done;
    }
    const int64_t *hs = handles.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        if (!PyBytes_Check(rec)) {
            PyErr_SetString(PyExc_TypeError, "records: bytes are needed");
            goto done;
        }
        Py_ssize_t length = PyBytes_GET_SIZE(rec);
        char *to = locate(&c, hs[i], length);
        if (to == NULL) {
            goto done;
        }
        memcpy(to, PyBytes_AS_STRING(rec), (size_t)length);
    }
    result = Py_NewRef(Py_None);
done:
    chunk_release(&c);
    PyBuffer_Release(&handles);
    return result;
}

PyDoc_STRVAR(read_doc,
"read(chunks, slots, record_at, id_len, key_len, headers_len, record_len)\n"
"    -> (ids, payloads)\n\n"
"The ids (str, UTF-8) and payloads (bytes) of slots, from the columns: a\n"
"record is its id, key and headers, then its payload.");

static PyObject *
blob_read(PyObject *self, PyObject *args)
{
    PyObject *chunks, *o_slots, *o_at, *o_id, *o_key, *o_head, *o_rec;
    Py_buffer slots, at, id_len, key_len, headers_len, record_len;
    PyObject *result = NULL, *ids = NULL, *payloads = NULL;
    if (!PyArg_ParseTuple(args, "O!OOOOOO", &PyList_Type, &chunks, &o_slots, &o_at, &o_id, &o_key,
                          &o_head, &o_rec)) {
        return NULL;
    }
    if (take(o_slots, &slots, 8, 0, "slots") < 0) {
        return NULL;
    }
    if (take(o_at, &at, 8, 0, "record_at") < 0) {
        goto s;
    }
    if (take(o_id, &id_len, 2, 0, "id_len") < 0) {
        goto a;
    }
    if (take(o_key, &key_len, 2, 0, "key_len") < 0) {
        goto i;
    }
    if (take(o_head, &headers_len, 2, 0, "headers_len") < 0) {
        goto k;
    }
    if (take(o_rec, &record_len, 4, 0, "record_len") < 0) {
        goto h;
    }
    Chunk c = {chunks, -1, {0}, 0};
    Py_ssize_t n = items(&slots), columns = items(&at);
    if (items(&id_len) < columns || items(&key_len) < columns || items(&headers_len) < columns ||
        items(&record_len) < columns) {
        PyErr_SetString(PyExc_ValueError, "the columns differ in length");
        goto r;
    }
    ids = PyList_New(n);
    payloads = PyList_New(n);
    if (ids == NULL || payloads == NULL) {
        goto r;
    }
    const int64_t *sl = slots.buf, *ra = at.buf;
    const uint16_t *il = id_len.buf, *kl = key_len.buf, *hl = headers_len.buf;
    const uint32_t *rl = record_len.buf;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t slot = sl[j];
        if (slot < 0 || slot >= columns) {
            PyErr_SetString(PyExc_ValueError, "slots: a slot outside the columns");
            goto r;
        }
        Py_ssize_t length = rl[slot], skip = (Py_ssize_t)il[slot] + kl[slot] + hl[slot];
        if (skip > length) {
            PyErr_SetString(PyExc_ValueError, "a record is shorter than its id, key and headers");
            goto r;
        }
        const char *rec = locate(&c, ra[slot], length);
        if (rec == NULL) {
            goto r;
        }
        PyObject *id = PyUnicode_DecodeUTF8(rec, il[slot], "strict");
        if (id == NULL) {
            goto r;
        }
        PyList_SET_ITEM(ids, j, id);
        PyObject *payload = PyBytes_FromStringAndSize(rec + skip, length - skip);
        if (payload == NULL) {
            goto r;
        }
        PyList_SET_ITEM(payloads, j, payload);
    }
    result = PyTuple_Pack(2, ids, payloads);
r:
    Py_XDECREF(ids);
    Py_XDECREF(payloads);
    chunk_release(&c);
    PyBuffer_Release(&record_len);
h:
    PyBuffer_Release(&headers_len);
k:
    PyBuffer_Release(&key_len);
i:
    PyBuffer_Release(&id_len);
a:
    PyBuffer_Release(&at);
s:
    PyBuffer_Release(&slots);
    return result;
}

static PyMethodDef methods[] = {
    {"write", blob_write, METH_VARARGS, write_doc},
    {"read", blob_read, METH_VARARGS, read_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "dejaq.storage_plugins.memory.blob_kernel",
    "The per-record loops of Blobs and Columns in C; blobs.py and columns.py hold the reference.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit_blob_kernel(void)
{
    return PyModule_Create(&module);
}
