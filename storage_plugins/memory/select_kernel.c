/* A lease's selection of due messages in C (Timeline._select in
   storage_plugins/memory/timeline.py, which holds the reference): the due
   tops of a few time indexes merged in time order, each entry popped from its
   index's `near` heap and kept when it is still its slot's current entry.

   The Python loop pays a tuple and a few attribute reads an entry, and a
   dozen numpy calls a batch to drop the stale entries; here an entry costs
   a heappop (heapq's own, so `near` stays the heap heapq keeps) and a few
   loads from the columns. An entry is timestamp << 32 | slot, a Python int
   (wider than 64 bits for today's timestamps): split with the number
   protocol, as the reference does. */

#include "kernel_buffer.h"
#include <stdint.h>

#define SLOT_BITS 32
#define LIVE 1

static PyObject *heappop;     /* heapq.heappop */
static PyObject *slot_mask;   /* (1 << 32) - 1 */
static PyObject *slot_bits;   /* 32 */
static PyObject *s_near, *s_bucket, *s_pending, *s_all_due, *s_fill;

/* One index with a due entry: its near[0] (a new reference), bucket and heap. */
typedef struct {
    PyObject *key;
    long long bucket;
    PyObject *near;     /* borrowed: the lane holds it */
    PyObject *lane;     /* borrowed: the caller's list holds it */
    PyObject *pending;  /* new reference */
    int all_due;
} Top;

/* Whether a orders before b, as heapq orders (key, bucket, ...) tuples; -1 on error. */
static int
before(const Top *a, const Top *b)
{
    int lt = PyObject_RichCompareBool(a->key, b->key, Py_LT);
    if (lt != 0) {
        return lt;
    }
    int gt = PyObject_RichCompareBool(b->key, a->key, Py_LT);
    if (gt != 0) {
        return gt < 0 ? -1 : 0;
    }
    return a->bucket < b->bucket;
}

static int
sift_down(Top *tops, Py_ssize_t n, Py_ssize_t i)
{
    for (;;) {
        Py_ssize_t least = i, l = 2 * i + 1, r = l + 1;
        if (l < n) {
            int b = before(&tops[l], &tops[least]);
            if (b < 0) {
                return -1;
            }
            if (b) {
                least = l;
            }
        }
        if (r < n) {
            int b = before(&tops[r], &tops[least]);
            if (b < 0) {
                return -1;
            }
            if (b) {
                least = r;
            }
        }
        if (least == i) {
            return 0;
        }
        Top t = tops[i];
        tops[i] = tops[least];
        tops[least] = t;
        i = least;
    }
}

/* Whether near[0] exists and is <= bound; near[0] (a new reference) in *key then. */
static int
due_top(PyObject *near, PyObject *bound, PyObject **key)
{
    *key = NULL;
    if (PyList_GET_SIZE(near) == 0) {
        return 0;
    }
    PyObject *first = PyList_GET_ITEM(near, 0);
    int le = PyObject_RichCompareBool(first, bound, Py_LE);
    if (le > 0) {
        Py_INCREF(first);
        *key = first;
    }
    return le;
}

static int
truthy_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

PyDoc_STRVAR(select_doc,
"select(lanes, bound, limit, state, timestamp, bucket, lane, key_no, seen, slots, dues)\n\n"
"Timeline._select's loop: pop the due entries (<= bound) of lanes in key order,\n"
"appending to slots and dues each one still current (state LIVE, timestamp,\n"
"bucket and, with key_no >= 0, lane matching) and not in seen, until slots\n"
"holds limit.");

static PyObject *
select_due(PyObject *self, PyObject *args)
{
    PyObject *lanes, *bound, *seen, *slots, *dues;
    PyObject *state_o, *ts_o, *bucket_o, *lane_o;
    Py_ssize_t limit;
    long long key_no;
    if (!PyArg_ParseTuple(args, "O!OnOOOOLO!O!O!", &PyList_Type, &lanes, &bound, &limit,
                          &state_o, &ts_o, &bucket_o, &lane_o, &key_no, &PySet_Type, &seen,
                          &PyList_Type, &slots, &PyList_Type, &dues)) {
        return NULL;
    }
    PyObject *result = NULL;  /* before the first goto: every exit returns it */
    Py_buffer state, ts, bucket, lane;
    if (take(state_o, &state, 1, 0, "state") < 0) {
        return NULL;
    }
    if (take(ts_o, &ts, 8, 0, "timestamp") < 0) {
        goto s;
    }
    if (take(bucket_o, &bucket, 2, 0, "bucket") < 0) {
        goto t;
    }
    if (take(lane_o, &lane, 4, 0, "lane") < 0) {
        goto b;
    }
    Py_ssize_t used = 0, n_lanes = PyList_GET_SIZE(lanes);
    Py_ssize_t rows = state.len;
    if (items(&ts) < rows || items(&bucket) < rows || items(&lane) < rows) {
        PyErr_SetString(PyExc_ValueError, "the columns differ in length");
        goto l;
    }
    Top *tops = PyMem_Calloc(n_lanes ? n_lanes : 1, sizeof(Top));
    if (tops == NULL) {
        PyErr_NoMemory();
        goto l;
    }
    const uint8_t *st = state.buf;
    const int64_t *tv = ts.buf;
    const uint16_t *bv = bucket.buf;
    const uint32_t *lv = lane.buf;
    for (Py_ssize_t i = 0; i < n_lanes; i++) {
        PyObject *ln = PyList_GET_ITEM(lanes, i);
        PyObject *near = PyObject_GetAttr(ln, s_near);
        if (near == NULL) {
            goto f;
        }
        Py_DECREF(near);  /* the lane keeps it */
        if (!PyList_Check(near)) {
            PyErr_SetString(PyExc_TypeError, "a lane's near is not a list");
            goto f;
        }
        PyObject *key;
        int due = due_top(near, bound, &key);
        if (due < 0) {
            goto f;
        }
        if (!due) {
            continue;
        }
        Top *t = &tops[used++];
        t->key = key;
        t->near = near;
        t->lane = ln;
        PyObject *bo = PyObject_GetAttr(ln, s_bucket);
        if (bo == NULL) {
            goto f;
        }
        t->bucket = PyLong_AsLongLong(bo);
        Py_DECREF(bo);
        if (t->bucket == -1 && PyErr_Occurred()) {
            goto f;
        }
        t->pending = PyObject_GetAttr(ln, s_pending);
        if (t->pending == NULL) {
            goto f;
        }
        if (!PyList_Check(t->pending)) {
            PyErr_SetString(PyExc_TypeError, "a lane's pending is not a list");
            goto f;
        }
        t->all_due = truthy_attr(ln, s_all_due);
        if (t->all_due < 0) {
            goto f;
        }
    }
    for (Py_ssize_t i = used / 2 - 1; i >= 0; i--) {
        if (sift_down(tops, used, i) < 0) {
            goto f;
        }
    }
    while (used > 0 && PyList_GET_SIZE(slots) < limit) {
        Top *t = &tops[0];
        PyObject *key = t->key;  /* ours now: the top takes a new one below */
        t->key = NULL;
        long long b = t->bucket;
        PyObject *popped = PyObject_CallOneArg(heappop, t->near);
        if (popped == NULL) {
            Py_DECREF(key);
            goto f;
        }
        Py_DECREF(popped);
        if (PyList_GET_SIZE(t->pending) || (PyList_GET_SIZE(t->near) == 0 && t->all_due)) {
            PyObject *r = PyObject_CallMethodNoArgs(t->lane, s_fill);
            if (r == NULL) {
                Py_DECREF(key);
                goto f;
            }
            Py_DECREF(r);
        }
        int again = due_top(t->near, bound, &t->key);
        if (again < 0) {
            Py_DECREF(key);
            goto f;
        }
        if (!again) {
            Py_DECREF(t->pending);
            tops[0] = tops[--used];
            tops[used].key = NULL;
            tops[used].pending = NULL;
        }
        if (used > 0 && sift_down(tops, used, 0) < 0) {
            Py_DECREF(key);
            goto f;
        }
        /* The entry: still its slot's current one, and not taken already? */
        PyObject *slot_o = PyNumber_And(key, slot_mask);
        PyObject *due_o = slot_o ? PyNumber_Rshift(key, slot_bits) : NULL;
        Py_DECREF(key);
        if (due_o == NULL) {
            Py_XDECREF(slot_o);
            goto f;
        }
        Py_ssize_t slot = PyLong_AsSsize_t(slot_o);
        long long due = PyLong_AsLongLong(due_o);
        int keep = 0;
        if ((slot == -1 || due == -1) && PyErr_Occurred()) {
            keep = -1;
        } else if (slot >= rows) {
            PyErr_SetString(PyExc_IndexError, "an entry names a slot past the columns");
            keep = -1;
        } else if (st[slot] == LIVE && tv[slot] == due && (long long)bv[slot] == b
                   && (key_no < 0 || (long long)lv[slot] == key_no)) {
            int known = PySet_Contains(seen, slot_o);
            if (known < 0) {
                keep = -1;
            } else if (!known) {
                keep = (PySet_Add(seen, slot_o) < 0 || PyList_Append(slots, slot_o) < 0
                        || PyList_Append(dues, due_o) < 0) ? -1 : 1;
            }
        }
        Py_DECREF(slot_o);
        Py_DECREF(due_o);
        if (keep < 0) {
            goto f;
        }
    }
    result = Py_None;
    Py_INCREF(result);
f:
    for (Py_ssize_t i = 0; i < used; i++) {
        Py_XDECREF(tops[i].key);
        Py_XDECREF(tops[i].pending);
    }
    PyMem_Free(tops);
l:
    PyBuffer_Release(&lane);
b:
    PyBuffer_Release(&bucket);
t:
    PyBuffer_Release(&ts);
s:
    PyBuffer_Release(&state);
    return result;
}

static PyMethodDef methods[] = {
    {"select", select_due, METH_VARARGS, select_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "dejaq.storage_plugins.memory.select_kernel",
    "A lease's selection of due messages in C; timeline.py holds the reference.",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit_select_kernel(void)
{
    PyObject *heapq = PyImport_ImportModule("heapq");
    if (heapq == NULL) {
        return NULL;
    }
    heappop = PyObject_GetAttrString(heapq, "heappop");
    Py_DECREF(heapq);
    if (heappop == NULL) {
        return NULL;
    }
    slot_mask = PyLong_FromLongLong((1LL << SLOT_BITS) - 1);
    slot_bits = PyLong_FromLong(SLOT_BITS);
    s_near = PyUnicode_InternFromString("near");
    s_bucket = PyUnicode_InternFromString("bucket");
    s_pending = PyUnicode_InternFromString("pending");
    s_all_due = PyUnicode_InternFromString("all_due");
    s_fill = PyUnicode_InternFromString("fill");
    if (!slot_mask || !slot_bits || !s_near || !s_bucket || !s_pending || !s_all_due || !s_fill) {
        return NULL;
    }
    return PyModule_Create(&module);
}
