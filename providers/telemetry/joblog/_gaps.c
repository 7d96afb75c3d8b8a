/* The job-log reader's gap pass, compiled: one walk over a gap's bytes that places its rank prefixes.

A gap is a run of whole lines of a node's tail that hold no candidate line (providers/telemetry/joblog/prefilter.py):
the node parser takes from them only how many lines there are and, for each rank that prefixes some of them, its
last such line. `place(data, start, end, reach)` walks `data[start:end]` a line at a time (`memchr` for the newline,
`memchr` for the line's first `[`, the prefix read in place, `memchr` for any other `[` on the line); it answers only
for a gap whose every `[rank` is its line's first `[`, a well-formed `[rankN]:` (1 to 9 digits) starting within
`reach` bytes of the line's start (as prefilter._RANK_LINE places a prefix: the plain line, or one behind a
collector's time, a CRI stream, a host), and returns None for any other, which the byte patterns of `prefilter.py`
read instead. The walk reads each byte at most twice, allocates per distinct rank, not per line, and holds no
reference to the data after it returns. tests/joblog/test_gaps.py compares it with a line-by-line reading. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t rank;
    Py_ssize_t at;     /* where the rank's last prefixed line starts */
    Py_ssize_t number; /* that line's 1-based position in the gap */
} Placed;

typedef struct {
    Placed *entries; /* in order of first sight */
    Py_ssize_t count, room;
    int32_t *slots; /* open addressing over entries by rank; -1 is empty */
    Py_ssize_t mask;
} Table;

static int table_init(Table *t) {
    t->count = 0;
    t->room = 16;
    t->mask = 63;
    t->entries = PyMem_RawMalloc(sizeof(Placed) * (size_t)t->room);
    t->slots = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(t->mask + 1));
    if (t->entries == NULL || t->slots == NULL) return -1;
    memset(t->slots, 0xff, sizeof(int32_t) * (size_t)(t->mask + 1));
    return 0;
}

static void table_free(Table *t) {
    PyMem_RawFree(t->entries);
    PyMem_RawFree(t->slots);
}

static Py_ssize_t slot_of(const Table *t, int64_t rank) {
    Py_ssize_t i = (Py_ssize_t)(((uint64_t)rank * 0x9E3779B97F4A7C15ull) >> 32) & t->mask;
    while (t->slots[i] >= 0 && t->entries[t->slots[i]].rank != rank) i = (i + 1) & t->mask;
    return i;
}

/* Record that `rank` prefixes the line at `at` (number `number`); 0, or -1 when memory ran out. */
static int table_put(Table *t, int64_t rank, Py_ssize_t at, Py_ssize_t number) {
    Py_ssize_t i = slot_of(t, rank);
    if (t->slots[i] >= 0) {
        Placed *e = &t->entries[t->slots[i]];
        e->at = at;
        e->number = number;
        return 0;
    }
    if (t->count == t->room) {
        Placed *grown = PyMem_RawRealloc(t->entries, sizeof(Placed) * (size_t)(t->room * 2));
        if (grown == NULL) return -1;
        t->entries = grown;
        t->room *= 2;
    }
    t->entries[t->count] = (Placed){rank, at, number};
    t->slots[i] = (int32_t)t->count;
    t->count++;
    if (t->count * 2 > t->mask + 1) { /* keep the table at most half full */
        Py_ssize_t size = (t->mask + 1) * 2;
        int32_t *slots = PyMem_RawMalloc(sizeof(int32_t) * (size_t)size);
        if (slots == NULL) return -1;
        memset(slots, 0xff, sizeof(int32_t) * (size_t)size);
        PyMem_RawFree(t->slots);
        t->slots = slots;
        t->mask = size - 1;
        for (Py_ssize_t k = 0; k < t->count; k++) t->slots[slot_of(t, t->entries[k].rank)] = (int32_t)k;
    }
    return 0;
}

enum { PLACED = 0, NOT_USUAL = 1, NO_MEMORY = 2 };

/* The walk, without the interpreter, a line at a time: fills `t`, `*lines` (the gap's lines, the last one with or
   without its newline) and `*last` (the last prefixed line's rank, -1 for none). A line's prefix is its first `[`
   when that is a well-formed `[rankN]:` within `reach` bytes of the line's start (behind a collector's time, a
   stream, a host, or nothing); any other `[rank` makes the gap one the walk does not place. */
static int walk(const unsigned char *d, Py_ssize_t start, Py_ssize_t end, Py_ssize_t reach, Table *t,
                Py_ssize_t *lines, int64_t *last) {
    Py_ssize_t pos = start, count = 0;
    *last = -1;
    while (pos < end) {
        const unsigned char *nl = memchr(d + pos, '\n', (size_t)(end - pos));
        Py_ssize_t line_end = nl ? nl - d : end;
        const unsigned char *open = memchr(d + pos, '[', (size_t)(line_end - pos));
        Py_ssize_t rest = open ? open - d + 1 : line_end; /* where a `[rank` would not be the line's prefix */
        count++;
        if (open && line_end - (open - d) >= 5 && memcmp(open, "[rank", 5) == 0) {
            if (open - d - pos > reach) return NOT_USUAL;          /* too far in for the parser to look */
            if (pos > 0 && d[pos - 1] != '\n') return NOT_USUAL; /* a gap that does not start a line */
            Py_ssize_t q = open - d + 5;
            int digits = 0;
            int64_t rank = 0;
            while (q < line_end && digits < 10 && d[q] >= '0' && d[q] <= '9') {
                rank = rank * 10 + (d[q] - '0');
                q++;
                digits++;
            }
            if (digits == 0 || digits > 9 || q + 2 > line_end || d[q] != ']' || d[q + 1] != ':') return NOT_USUAL;
            if (table_put(t, rank, pos, count) < 0) return NO_MEMORY;
            *last = rank;
            rest = q + 2;
        }
        for (Py_ssize_t at = rest; at < line_end;) { /* any other `[rank` on the line */
            const unsigned char *bracket = memchr(d + at, '[', (size_t)(line_end - at));
            if (bracket == NULL) break;
            at = bracket - d;
            if (line_end - at >= 5 && memcmp(bracket + 1, "rank", 4) == 0) return NOT_USUAL;
            at++;
        }
        if (nl == NULL) break;
        pos = line_end + 1;
    }
    *lines = count;
    return PLACED;
}

static PyObject *place(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "place(data: bytes, start: int, end: int, reach: int)");
        return NULL;
    }
    PyObject *data = args[0];
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t reach = PyLong_AsSsize_t(args[3]);
    if (reach == -1 && PyErr_Occurred()) return NULL;
    if (reach < 0) {
        PyErr_SetString(PyExc_ValueError, "place: reach must not be negative");
        return NULL;
    }
    if (start < 0 || end > size || start >= end) {
        PyErr_SetString(PyExc_ValueError, "place: the gap must be a non-empty range of the data");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    Table t;
    if (table_init(&t) < 0) {
        table_free(&t);
        return PyErr_NoMemory();
    }
    Py_ssize_t lines = 0;
    int64_t last = -1;
    /* The interpreter's lock is kept: the walk is short (tens of microseconds), and a thread giving the lock up
       waits for it again behind any thread running Python (the switch interval, 5 ms) once per gap. */
    int outcome = walk(d, start, end, reach, &t, &lines, &last);
    if (outcome != PLACED) {
        table_free(&t);
        if (outcome == NO_MEMORY) return PyErr_NoMemory();
        Py_RETURN_NONE;
    }
    PyObject *placed = PyTuple_New(t.count);
    if (placed == NULL) {
        table_free(&t);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < t.count; k++) {
        const Placed *e = &t.entries[k];
        const unsigned char *nl = memchr(d + e->at, '\n', (size_t)(end - e->at));
        Py_ssize_t line_end = nl ? nl - d : end;
        PyObject *item = Py_BuildValue("(LnnL)", (long long)e->rank, e->at, line_end, (long long)e->number);
        if (item == NULL) {
            Py_DECREF(placed);
            table_free(&t);
            return NULL;
        }
        PyTuple_SET_ITEM(placed, k, item);
    }
    table_free(&t);
    if (last < 0) return Py_BuildValue("(nNO)", lines, placed, Py_None);
    return Py_BuildValue("(nNL)", lines, placed, (long long)last);
}

static PyMethodDef methods[] = {
    {.ml_name = "place", .ml_meth = (PyCFunction)(void (*)(void))place, .ml_flags = METH_FASTCALL, .ml_doc =
     "place(data, start, end, reach) -> (lines, ((rank, at, line_end, number), ...), last_rank) or None\n\n"
     "The lines of data[start:end] (a gap of whole lines) and, per rank in order of first sight, where its last "
     "prefixed line starts and ends and that line's 1-based number; None when some `[rank` there is not its "
     "line's first `[`, a well-formed prefix within reach bytes of the line's start."},
    {0},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_gaps",
    .m_doc = "The job-log reader's gap pass, compiled.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__gaps(void) { return PyModule_Create(&module_def); }
