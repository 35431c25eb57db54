/* A batch's change of lease owner in C (Timeline._set_owner in
   storage_plugins/memory/timeline.py, which holds the reference): each slot's
   owner number replaced, the numbers let go of counted, and the ids that
   gain or lose an owner entered in or taken out of `held`.

   The reference pays a gather, a scatter, a mask and a few numpy calls a
   batch to count the numbers let go of, then a dict update over lists made
   of arrays; here it is one pass over the slots. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A C-contiguous 1-d buffer of `size`-byte items. */
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

/* counts[key] += 1 */
static int
count(PyObject *counts, uint32_t key)
{
    PyObject *k = PyLong_FromUnsignedLong(key);
    if (k == NULL) {
        return -1;
    }
    PyObject *was = PyDict_GetItemWithError(counts, k);
    long n = 1;
    if (was != NULL) {
        n += PyLong_AsLong(was);
    } else if (PyErr_Occurred()) {
        Py_DECREF(k);
        return -1;
    }
    PyObject *v = PyLong_FromLong(n);
    int r = v == NULL ? -1 : PyDict_SetItem(counts, k, v);
    Py_XDECREF(v);
    Py_DECREF(k);
    return r;
}

PyDoc_STRVAR(swap_doc,
"swap(owner, slots, number, ids, held) -> (changed, let_go)\n\n"
"Set owner[slot] = number for each of slots (int64), counting in let_go\n"
"(number -> messages) each non-zero number replaced. The positions whose\n"
"slot gains an owner (number != 0, it had none) or loses it (number == 0,\n"
"it had one) change `held`: with ids (a list of str, one a slot), ids[i] is\n"
"set to slots[i] or deleted there, and changed is None; without (None),\n"
"held is left alone and changed lists those positions.");

static PyObject *
swap(PyObject *self, PyObject *args)
{
    PyObject *owner_o, *slots_o, *ids, *held;
    unsigned long number;
    if (!PyArg_ParseTuple(args, "OOkOO!", &owner_o, &slots_o, &number, &ids, &PyDict_Type,
                          &held)) {
        return NULL;
    }
    if (ids != Py_None && !PyList_Check(ids)) {
        PyErr_SetString(PyExc_TypeError, "ids: a list or None is needed");
        return NULL;
    }
    Py_buffer owner, slots;
    if (take(owner_o, &owner, 4, PyBUF_WRITABLE, "owner") < 0) {
        return NULL;
    }
    if (take(slots_o, &slots, 8, 0, "slots") < 0) {
        PyBuffer_Release(&owner);
        return NULL;
    }
    PyObject *result = NULL, *changed = NULL;
    uint32_t *befores = NULL;
    PyObject *let_go = PyDict_New();
    Py_ssize_t n = slots.len / 8, rows = owner.len / 4;
    if (let_go == NULL) {
        goto done;
    }
    if (ids != Py_None && PyList_GET_SIZE(ids) != n) {
        PyErr_SetString(PyExc_ValueError, "ids and slots differ in length");
        goto done;
    }
    if (ids == Py_None && (changed = PyList_New(0)) == NULL) {
        goto done;
    }
    uint32_t *ov = owner.buf;
    const int64_t *sv = slots.buf;
    /* Every slot checked, and its owner read, before the first change (as the
       reference gathers them): a bad slot changes nothing. */
    befores = PyMem_Malloc((n ? n : 1) * sizeof(uint32_t));
    if (befores == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sv[i] < 0 || sv[i] >= rows) {
            PyErr_SetString(PyExc_IndexError, "a slot is past the columns");
            goto done;
        }
        befores[i] = ov[sv[i]];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t before = befores[i];
        ov[sv[i]] = (uint32_t)number;
        if (before && count(let_go, before) < 0) {
            goto done;
        }
        if (number ? before != 0 : before == 0) {
            continue;
        }
        if (changed != NULL) {
            PyObject *at = PyLong_FromSsize_t(i);
            int r = at == NULL ? -1 : PyList_Append(changed, at);
            Py_XDECREF(at);
            if (r < 0) {
                goto done;
            }
        } else if (number) {
            PyObject *slot = PyLong_FromLongLong(sv[i]);
            int r = slot == NULL ? -1 : PyDict_SetItem(held, PyList_GET_ITEM(ids, i), slot);
            Py_XDECREF(slot);
            if (r < 0) {
                goto done;
            }
        } else if (PyDict_DelItem(held, PyList_GET_ITEM(ids, i)) < 0) {
            goto done;
        }
    }
    result = PyTuple_Pack(2, changed != NULL ? changed : Py_None, let_go);
done:
    PyMem_Free(befores);
    Py_XDECREF(changed);
    Py_XDECREF(let_go);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&owner);
    return result;
}

static PyMethodDef methods[] = {
    {"swap", swap, METH_VARARGS, swap_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "dejaq.storage_plugins.memory.owner_kernel",
    "A batch's change of lease owner in C; timeline.py holds the reference.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit_owner_kernel(void)
{
    return PyModule_Create(&module);
}
