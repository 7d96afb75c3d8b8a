/* Literal texts searched for in a buffer at once, through the Hyperscan API of Debian's Vectorscan library (libhs,
package libvectorscan-dev to build, libvectorscan5 to run) (providers/telemetry/literals.py).

`Search(words)` takes the texts as bytes, none empty; `search.ends(data)` gives every match of every text in `data`
as (where it ends, the index of its text in `words`), sorted. The texts longer than one byte are one database compiled
as patterns each of which is its text with every byte but ASCII letters and digits written `\xNN` (the library's
literal API, `hs_compile_lit_multi`, takes a text that starts with a NUL byte for an empty one); a one-byte text is
found by `memchr`, as a database holding one made every scan slower (literals.py says by how much).

The matches are kept in a C array by the library's callback and turned into Python objects once, sorted: no Python
code runs and no interpreter lock is taken per match. The scan holds the interpreter lock (a node's tail is scanned
in tens of microseconds; letting another thread take the lock for that long would make this one wait for its turn),
so one scratch space serves every thread. tests/telemetry/test_literals.py compares the matches with `bytes.find`. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <hs/hs.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned long long end;
    unsigned int id;
} Hit;

typedef struct {
    Hit *hits;
    size_t count, room;
    int out_of_memory;
} Hits;

typedef struct {
    PyObject_HEAD
    hs_database_t *database; /* NULL when every text is one byte */
    hs_scratch_t *scratch;
    unsigned char *bytes;    /* the one-byte texts */
    unsigned int *byte_ids;  /* and their indices */
    Py_ssize_t byte_count;
} Search;

/* `text` as a pattern matching exactly its bytes (`\xNN` for each byte but ASCII letters and digits), NUL-ended, in
memory from PyMem_Malloc; NULL when there is none. */
static char *pattern_of(const unsigned char *text, Py_ssize_t size) {
    static const char hex[] = "0123456789abcdef";
    char *out = PyMem_Malloc((size_t)size * 4 + 1);
    if (out == NULL) return NULL;
    char *at = out;
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = text[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            *at++ = (char)c;
        } else {
            *at++ = '\\';
            *at++ = 'x';
            *at++ = hex[c >> 4];
            *at++ = hex[c & 15];
        }
    }
    *at = '\0';
    return out;
}

static int add_hit(Hits *found, unsigned long long end, unsigned int id) {
    if (found->count == found->room) {
        size_t room = found->room ? found->room * 2 : 64;
        Hit *more = realloc(found->hits, room * sizeof(Hit));
        if (more == NULL) {
            found->out_of_memory = 1;
            return -1;
        }
        found->hits = more;
        found->room = room;
    }
    found->hits[found->count].end = end;
    found->hits[found->count].id = id;
    found->count++;
    return 0;
}

static int on_match(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags, void *context) {
    (void)from;
    (void)flags;
    return add_hit(context, to, id) == 0 ? 0 : 1; /* non-zero stops the scan */
}

static int by_end_then_id(const void *a, const void *b) {
    const Hit *x = a, *y = b;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static void search_dealloc(Search *self) {
    if (self->scratch != NULL) hs_free_scratch(self->scratch);
    if (self->database != NULL) hs_free_database(self->database);
    PyMem_Free(self->bytes);
    PyMem_Free(self->byte_ids);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void free_patterns(char **patterns, unsigned int count) {
    if (patterns == NULL) return;
    for (unsigned int i = 0; i < count; i++) PyMem_Free(patterns[i]);
    PyMem_Free(patterns);
}

static PyObject *search_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *words;
    static char *names[] = {"words", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:Search", names, &PyTuple_Type, &words)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(words);
    if (count == 0 || count > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "a literal search needs texts, none of them empty");
        return NULL;
    }
    Search *self = (Search *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    char **patterns = PyMem_Calloc((size_t)count, sizeof(char *));
    unsigned int *ids = PyMem_Calloc((size_t)count, sizeof(unsigned int));
    unsigned int *flags = PyMem_Calloc((size_t)count, sizeof(unsigned int));
    self->bytes = PyMem_Calloc((size_t)count, 1);
    self->byte_ids = PyMem_Calloc((size_t)count, sizeof(unsigned int));
    unsigned int longer = 0;
    if (patterns == NULL || ids == NULL || flags == NULL || self->bytes == NULL ||
        self->byte_ids == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyTuple_GET_ITEM(words, i);
        if (!PyBytes_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "each text must be bytes");
            goto fail;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(word);
        if (size == 0) {
            PyErr_SetString(PyExc_ValueError, "a literal search needs texts, none of them empty");
            goto fail;
        }
        if (size == 1) {
            self->bytes[self->byte_count] = (unsigned char)PyBytes_AS_STRING(word)[0];
            self->byte_ids[self->byte_count++] = (unsigned int)i;
        } else {
            patterns[longer] = pattern_of((const unsigned char *)PyBytes_AS_STRING(word), size);
            if (patterns[longer] == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            ids[longer++] = (unsigned int)i;
        }
    }
    if (longer > 0) {
        hs_compile_error_t *error = NULL;
        if (hs_compile_multi((const char *const *)patterns, flags, ids, longer, HS_MODE_BLOCK, NULL, &self->database,
                             &error) != HS_SUCCESS) {
            PyErr_Format(PyExc_ValueError, "the texts cannot be compiled: %s",
                         error != NULL && error->message != NULL ? error->message : "no reason given");
            if (error != NULL) hs_free_compile_error(error);
            goto fail;
        }
        if (hs_alloc_scratch(self->database, &self->scratch) != HS_SUCCESS) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    free_patterns(patterns, longer);
    PyMem_Free(ids);
    PyMem_Free(flags);
    return (PyObject *)self;
fail:
    free_patterns(patterns, longer);
    PyMem_Free(ids);
    PyMem_Free(flags);
    Py_DECREF(self);
    return NULL;
}

static PyObject *search_ends(Search *self, PyObject *data) {
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) != 0) return NULL;
    if (view.len > UINT_MAX) { /* the library's length is an unsigned int */
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a buffer of 4 GiB or more cannot be scanned at once");
        return NULL;
    }
    Hits found = {NULL, 0, 0, 0};
    if (self->database != NULL && view.len > 0) {
        hs_error_t status =
            hs_scan(self->database, view.buf, (unsigned int)view.len, 0, self->scratch, on_match, &found);
        if (status != HS_SUCCESS && !(status == HS_SCAN_TERMINATED && found.out_of_memory)) {
            PyBuffer_Release(&view);
            free(found.hits);
            PyErr_Format(PyExc_RuntimeError, "the literal scan failed (Hyperscan error %d)", (int)status);
            return NULL;
        }
    }
    const unsigned char *base = view.buf;
    for (Py_ssize_t b = 0; b < self->byte_count && !found.out_of_memory; b++) {
        const unsigned char *at = base, *end = base + view.len;
        while (at < end && (at = memchr(at, self->bytes[b], (size_t)(end - at))) != NULL) {
            if (add_hit(&found, (unsigned long long)(at - base) + 1, self->byte_ids[b]) != 0) break;
            at++;
        }
    }
    PyBuffer_Release(&view);
    if (found.out_of_memory) {
        free(found.hits);
        return PyErr_NoMemory();
    }
    if (found.count > 1) qsort(found.hits, found.count, sizeof(Hit), by_end_then_id);
    PyObject *out = PyList_New((Py_ssize_t)found.count);
    for (size_t i = 0; out != NULL && i < found.count; i++) {
        PyObject *end = PyLong_FromUnsignedLongLong(found.hits[i].end);
        PyObject *id = PyLong_FromUnsignedLong(found.hits[i].id);
        PyObject *pair = end != NULL && id != NULL ? PyTuple_New(2) : NULL;
        if (pair == NULL) {
            Py_XDECREF(end);
            Py_XDECREF(id);
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(pair, 0, end);
        PyTuple_SET_ITEM(pair, 1, id);
        PyList_SET_ITEM(out, (Py_ssize_t)i, pair);
    }
    free(found.hits);
    return out;
}

static PyMethodDef search_methods[] = {
    {"ends", (PyCFunction)search_ends, METH_O,
     "ends(data) -> every match in data as (where it ends, the index of its text), sorted"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SearchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "providers.telemetry._literals.Search",
    .tp_basicsize = sizeof(Search),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Search(words): literal texts (bytes, none empty) compiled once; ends(data) finds them all",
    .tp_new = search_new,
    .tp_dealloc = (destructor)search_dealloc,
    .tp_methods = search_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_literals", "Literal texts searched for at once (Vectorscan's libhs).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__literals(void) {
    if (hs_valid_platform() != HS_SUCCESS) {
        PyErr_SetString(PyExc_ImportError, "this CPU lacks the instructions the literal search's library needs");
        return NULL;
    }
    if (PyType_Ready(&SearchType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&SearchType);
    if (PyModule_AddObject(m, "Search", (PyObject *)&SearchType) < 0) {
        Py_DECREF(&SearchType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
