/* The job-log reader's candidate lines, from the matches of its search (providers/telemetry/joblog/prefilter.py).

`lines(data, found, lengths, deciding, markers)` takes the sorted (end, id) matches of every word the reader looks
for in `data` (`Literals.ends`; no word holds a newline, so each match lies on one line) and gives, in order, each
line holding a match of a deciding word (`deciding[id]` not 0): (where the line starts, where it ends (its newline,
or the end of the data), its marks). The marks (`lines.Marks`) are the ids below `markers` (the signal table's) in
the order found, the first start and the last end among those matches relative to the line's start (the line's
end and start when there is none), the line's matches (a slice of `found`), the line's start, and `lengths`.
tests/joblog/test_candidates.py compares it with the same grouping written in Python. */

#define _GNU_SOURCE /* memrchr */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* Where the line holding `base[at]` starts. */
static Py_ssize_t line_start(const char *base, Py_ssize_t at) {
    const char *newline = at > 0 ? memrchr(base, '\n', (size_t)at) : NULL;
    return newline == NULL ? 0 : newline - base + 1;
}

/* Append one candidate line's tuple to `out`: 0, or -1 with an error set. */
static int add_candidate(PyObject *out, PyObject *found, PyObject *lengths, Py_ssize_t head, Py_ssize_t tail,
                         PyObject *ids, Py_ssize_t low, Py_ssize_t high, Py_ssize_t first, Py_ssize_t last) {
    PyObject *id_tuple = PyList_AsTuple(ids);
    PyObject *matches = PyList_GetSlice(found, first, last);
    PyObject *marks = NULL, *line = NULL;
    if (id_tuple != NULL && matches != NULL) {
        marks = Py_BuildValue("(OnnOnO)", id_tuple, low - head, high - head, matches, head, lengths);
    }
    if (marks != NULL) line = Py_BuildValue("(nnO)", head, tail, marks);
    int status = line == NULL ? -1 : PyList_Append(out, line);
    Py_XDECREF(id_tuple);
    Py_XDECREF(matches);
    Py_XDECREF(marks);
    Py_XDECREF(line);
    return status;
}

static PyObject *lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "lines(data, found, lengths, deciding, markers) takes 5 arguments");
        return NULL;
    }
    PyObject *found = args[1], *lengths = args[2];
    if (!PyList_Check(found) || !PyTuple_Check(lengths)) {
        PyErr_SetString(PyExc_TypeError, "found must be a list and lengths a tuple");
        return NULL;
    }
    Py_ssize_t markers = PyLong_AsSsize_t(args[4]);
    if (markers == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view, mask;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0) return NULL;
    if (PyObject_GetBuffer(args[3], &mask, PyBUF_SIMPLE) != 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *base = view.buf;
    const unsigned char *deciding = mask.buf;
    Py_ssize_t words = PyTuple_GET_SIZE(lengths);
    PyObject *out = PyList_New(0), *ids = NULL;
    if (out == NULL) goto fail;
    Py_ssize_t head = -1, tail = -1, first = 0, low = 0, high = 0;
    int is_candidate = 0;
    Py_ssize_t count = PyList_GET_SIZE(found);
    for (Py_ssize_t index = 0; index < count; index++) {
        PyObject *match = PyList_GET_ITEM(found, index);
        if (!PyTuple_Check(match) || PyTuple_GET_SIZE(match) != 2) {
            PyErr_SetString(PyExc_TypeError, "a match is an (end, id) pair");
            goto fail;
        }
        Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(match, 0));
        Py_ssize_t ident = PyLong_AsSsize_t(PyTuple_GET_ITEM(match, 1));
        if (PyErr_Occurred()) goto fail;
        if (ident < 0 || ident >= words || ident >= mask.len) {
            PyErr_SetString(PyExc_ValueError, "a match's id has no word");
            goto fail;
        }
        Py_ssize_t start = end - PyLong_AsSsize_t(PyTuple_GET_ITEM(lengths, ident));
        if (PyErr_Occurred()) goto fail;
        if (start < 0 || end > view.len || start >= end) {
            PyErr_SetString(PyExc_ValueError, "a match lies outside the data");
            goto fail;
        }
        if (start >= tail) { /* a match on a later line */
            if (is_candidate && add_candidate(out, found, lengths, head, tail, ids, low, high, first, index) < 0) {
                goto fail;
            }
            head = line_start(base, start);
            const char *newline = memchr(base + end, '\n', (size_t)(view.len - end));
            tail = newline == NULL ? view.len : newline - base;
            Py_XDECREF(ids);
            ids = PyList_New(0);
            if (ids == NULL) goto fail;
            first = index;
            low = tail;
            high = head;
            is_candidate = 0;
        }
        if (ident < markers) {
            if (PyList_Append(ids, PyTuple_GET_ITEM(match, 1)) < 0) goto fail;
            if (start < low) low = start;
            if (end > high) high = end;
        }
        if (deciding[ident]) is_candidate = 1;
    }
    if (is_candidate && add_candidate(out, found, lengths, head, tail, ids, low, high, first, count) < 0) goto fail;
    Py_XDECREF(ids);
    PyBuffer_Release(&view);
    PyBuffer_Release(&mask);
    return out;
fail:
    Py_XDECREF(ids);
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    PyBuffer_Release(&mask);
    return NULL;
}

static PyMethodDef methods[] = {
    {.ml_name = "lines", .ml_meth = (PyCFunction)(void (*)(void))lines, .ml_flags = METH_FASTCALL, .ml_doc =
     "lines(data, found, lengths, deciding, markers) -> [(start, end, marks), ...]\n\n"
     "The lines of data holding a match of a deciding word, each with its marks, from the sorted (end, id) "
     "matches found."},
    {0},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_candidates",
    .m_doc = "The job-log reader's candidate lines, from its search's matches.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__candidates(void) { return PyModule_Create(&module_def); }
