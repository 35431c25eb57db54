/* The IdTable's probing loops in C (storage_plugins/memory/ids.py).

   ids.py keeps the numpy version of each loop as the reference and for a
   build without a compiler; this module walks each id's probe sequence
   directly, where the numpy version pays a few numpy calls a probe distance
   for every id of a batch still probing. The arrays come in through the
   buffer protocol, each checked for its item size and contiguity. */

#include "kernel_buffer.h"
#include <stdint.h>

#define EMPTY 0
#define DELETED (-1)

/* A table's size is a power of two (ids.py), so a mask wraps a position. */
static int
table_mask(Py_buffer *table, uint64_t *mask)
{
    Py_ssize_t n = items(table);
    if (n <= 0 || (n & (n - 1)) != 0) {
        PyErr_SetString(PyExc_ValueError, "table: its size must be a power of two");
        return -1;
    }
    *mask = (uint64_t)n - 1;
    return 0;
}

PyDoc_STRVAR(probe_doc,
"probe(table, known, hashes, out, spots)\n\n"
"For each of hashes: out[i] the first slot entered under an equal hash\n"
"(known: each slot's hash), or -1; spots[i] the first free position the\n"
"probe passed (deleted or empty), or -1.");

static PyObject *
probe(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_known, *o_hashes, *o_out, *o_spots, *result = NULL;
    Py_buffer table, known, hashes, out, spots;
    if (!PyArg_ParseTuple(args, "OOOOO", &o_table, &o_known, &o_hashes, &o_out, &o_spots)) {
        return NULL;
    }
    if (take(o_table, &table, 4, 0, "table") < 0) {
        return NULL;
    }
    if (take(o_known, &known, 8, 0, "known") < 0) {
        goto t;
    }
    if (take(o_hashes, &hashes, 8, 0, "hashes") < 0) {
        goto k;
    }
    if (take(o_out, &out, 8, PyBUF_WRITABLE, "out") < 0) {
        goto h;
    }
    if (take(o_spots, &spots, 8, PyBUF_WRITABLE, "spots") < 0) {
        goto o;
    }
    uint64_t mask;
    Py_ssize_t n = items(&hashes);
    if (table_mask(&table, &mask) < 0) {
        goto s;
    }
    if (items(&out) != n || items(&spots) != n) {
        PyErr_SetString(PyExc_ValueError, "out and spots: one item a hash is needed");
        goto s;
    }
    const int32_t *tab = table.buf;
    const int64_t *kn = known.buf, *hs = hashes.buf;
    int64_t *outp = out.buf, *sp = spots.buf;
    Py_ssize_t n_known = items(&known);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t h = hs[i], found = -1, spot = -1;
        uint64_t pos = (uint64_t)h & mask;
        /* Every full table has an empty position (ids.py keeps the load
           under 0.7), so a probe ends; the bound only guards a bad table. */
        for (uint64_t step = 0; step <= mask; step++) {
            int32_t at = tab[pos];
            if (at == EMPTY) {
                if (spot < 0) {
                    spot = (int64_t)pos;
                }
                break;
            }
            if (at > 0) {
                if (at > n_known) {
                    PyErr_SetString(PyExc_ValueError, "table: a slot beyond the known hashes");
                    goto s;
                }
                if (kn[at - 1] == h) {
                    found = at - 1;
                    break;
                }
            }
            else if (spot < 0) {
                spot = (int64_t)pos;
            }
            pos = (pos + 1) & mask;
        }
        outp[i] = found;
        sp[i] = spot;
    }
    result = Py_NewRef(Py_None);
s:
    PyBuffer_Release(&spots);
o:
    PyBuffer_Release(&out);
h:
    PyBuffer_Release(&hashes);
k:
    PyBuffer_Release(&known);
t:
    PyBuffer_Release(&table);
    return result;
}

PyDoc_STRVAR(place_doc,
"place(table, id_at, hashes, slots, spots) -> int\n\n"
"Enter each of slots (as slot + 1) under its hash, at spots[i] where that\n"
"is still free (spots: from probe, -1 for none), else at the first free\n"
"position of its probe; id_at[slot] takes the position. Returns how many\n"
"deleted positions were reused.");

static PyObject *
place(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_id_at, *o_hashes, *o_slots, *o_spots, *result = NULL;
    Py_buffer table, id_at, hashes, slots, spots;
    if (!PyArg_ParseTuple(args, "OOOOO", &o_table, &o_id_at, &o_hashes, &o_slots, &o_spots)) {
        return NULL;
    }
    if (take(o_table, &table, 4, PyBUF_WRITABLE, "table") < 0) {
        return NULL;
    }
    if (take(o_id_at, &id_at, 4, PyBUF_WRITABLE, "id_at") < 0) {
        goto t;
    }
    if (take(o_hashes, &hashes, 8, 0, "hashes") < 0) {
        goto a;
    }
    if (take(o_slots, &slots, 8, 0, "slots") < 0) {
        goto h;
    }
    if (take(o_spots, &spots, 8, 0, "spots") < 0) {
        goto l;
    }
    uint64_t mask;
    Py_ssize_t n = items(&slots);
    if (table_mask(&table, &mask) < 0) {
        goto s;
    }
    if (items(&hashes) != n || items(&spots) != n) {
        PyErr_SetString(PyExc_ValueError, "hashes and spots: one item a slot is needed");
        goto s;
    }
    int32_t *tab = table.buf;
    uint32_t *where = id_at.buf;
    const int64_t *hs = hashes.buf, *sl = slots.buf, *sp = spots.buf;
    Py_ssize_t n_slots = items(&id_at);
    long reused = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t slot = sl[i];
        if (slot < 0 || slot >= n_slots || slot >= INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "slots: a slot outside id_at");
            goto s;
        }
        uint64_t pos;
        if (sp[i] >= 0 && (uint64_t)sp[i] <= mask && tab[sp[i]] <= 0) {
            pos = (uint64_t)sp[i];
        }
        else {
            pos = (uint64_t)hs[i] & mask;
            uint64_t step = 0;
            while (tab[pos] > 0) {
                if (++step > mask) {
                    PyErr_SetString(PyExc_ValueError, "table: no free position");
                    goto s;
                }
                pos = (pos + 1) & mask;
            }
        }
        if (tab[pos] == DELETED) {
            reused++;
        }
        tab[pos] = (int32_t)(slot + 1);
        where[slot] = (uint32_t)pos;
    }
    result = PyLong_FromLong(reused);
s:
    PyBuffer_Release(&spots);
l:
    PyBuffer_Release(&slots);
h:
    PyBuffer_Release(&hashes);
a:
    PyBuffer_Release(&id_at);
t:
    PyBuffer_Release(&table);
    return result;
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, probe_doc},
    {"place", place, METH_VARARGS, place_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "dejaq.storage_plugins.memory.id_kernel",
    "The IdTable's probing loops in C; ids.py holds the reference.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit_id_kernel(void)
{
    return PyModule_Create(&module);
}
