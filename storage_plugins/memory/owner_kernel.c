/* A batch's change of lease owner in C (Timeline._set_owner in
   storage_plugins/memory/timeline.py, which holds the reference): each slot's
   owner number replaced, the numbers let go of counted, and the ids that
   gain or lose an owner entered in or taken out of `held`. And a settle's
   check that its consumer holds every message it names at the version it
   quotes (MemoryStorage._held in storage.py, the reference).

   The reference pays a gather, a scatter, a mask and a few numpy calls a
   batch to count the numbers let go of, then a dict update over lists made
   of arrays; here it is one pass over the slots. */

#include "kernel_buffer.h"
#include <stdint.h>

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
    Py_ssize_t n = items(&slots), rows = items(&owner);
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

PyDoc_STRVAR(holds_doc,
"holds(items, held, number, owner, state, version, out) -> bool\n\n"
"Whether every (id, version) of items names a message of held whose owner\n"
"is number, live, at that version; their slots in out (int64, one an item)\n"
"then. False as soon as one does not: the caller's reference then says why.");

static PyObject *
holds(PyObject *self, PyObject *args)
{
    PyObject *pairs, *held, *owner_o, *state_o, *version_o, *out_o;
    unsigned long number;
    if (!PyArg_ParseTuple(args, "O!O!kOOOO", &PyList_Type, &pairs, &PyDict_Type, &held, &number,
                          &owner_o, &state_o, &version_o, &out_o)) {
        return NULL;
    }
    Py_buffer owner, state, version, out;
    PyObject *result = NULL;
    if (take(owner_o, &owner, 4, 0, "owner") < 0) {
        return NULL;
    }
    if (take(state_o, &state, 1, 0, "state") < 0) {
        goto o;
    }
    if (take(version_o, &version, 8, 0, "version") < 0) {
        goto s;
    }
    if (take(out_o, &out, 8, PyBUF_WRITABLE, "out") < 0) {
        goto v;
    }
    Py_ssize_t n = PyList_GET_SIZE(pairs), rows = items(&owner);
    if (items(&out) != n || items(&state) < rows || items(&version) < rows) {
        PyErr_SetString(PyExc_ValueError, "the columns or out differ in length");
        goto r;
    }
    const uint32_t *ov = owner.buf;
    const uint8_t *sv = state.buf;
    const int64_t *vv = version.buf;
    int64_t *slots = out.buf;
    int all = number != 0;
    for (Py_ssize_t i = 0; all && i < n; i++) {
        PyObject *item = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            all = 0;  /* not a plain pair: the reference reads it */
            break;
        }
        PyObject *at = PyDict_GetItemWithError(held, PyTuple_GET_ITEM(item, 0));
        if (at == NULL) {
            if (PyErr_Occurred()) {
                goto r;
            }
            all = 0;
            break;
        }
        PyObject *quoted_o = PyTuple_GET_ITEM(item, 1);
        if (!PyLong_Check(quoted_o)) {
            all = 0;  /* the reference compares what it is */
            break;
        }
        int overflow = 0;
        long long quoted = PyLong_AsLongLongAndOverflow(quoted_o, &overflow);
        long long slot = PyLong_AsLongLong(at);
        if (slot == -1 && PyErr_Occurred()) {
            goto r;
        }
        if (overflow || slot < 0 || slot >= rows || ov[slot] != number || sv[slot] != 1
            || vv[slot] != quoted) {
            all = 0;
            break;
        }
        slots[i] = slot;
    }
    result = PyBool_FromLong(all);
r:
    PyBuffer_Release(&out);
v:
    PyBuffer_Release(&version);
s:
    PyBuffer_Release(&state);
o:
    PyBuffer_Release(&owner);
    return result;
}

static PyMethodDef methods[] = {
    {"swap", swap, METH_VARARGS, swap_doc},
    {"holds", holds, METH_VARARGS, holds_doc},
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
