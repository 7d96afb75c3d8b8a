/* A node's Loki entries as one buffer for the job-log reader (providers/telemetry/joblog/loki.py, `_joined`).

`joined(entries)` takes a list of (time, line): the time a count of nanoseconds since the epoch, 0 to 2**63-1 (what
`loki.client.read_entries` accepts), the line a str. It gives the UTF-8 bytes of the lines, oldest first as given,
each behind Loki's time (`YYYY-MM-DDTHH:MM:SS.ffffffZ`, UTC, the microseconds cut, not rounded: patterns.py's
`LOKI_TIME`) and a blank, joined by newlines; a newline inside a line is written U+FFFD, so that the line stays one.
A line that cannot be written in UTF-8 (a lone surrogate) raises UnicodeEncodeError, as `str.encode` does.

Written in Python the same took 0.85 us a line (an f-string per line, the text joined and encoded), a fifth of a Loki
node's parse. tests/telemetry/test_loki_job_buffer.py compares the bytes with the calendar's own text and with the
lines written in Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* `YYYY-MM-DDTHH:MM:SS.ffffffZ` */
#define STAMP 27

static int leap(int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

static void two(char *out, int value) {
    out[0] = (char)('0' + value / 10);
    out[1] = (char)('0' + value % 10);
}

/* `YYYY-MM-DD` of the day `day` counted from 1970-01-01 (0 to 106,751: the days of times up to 2**63-1 ns). */
static void write_date(int64_t day, char *out) {
    static const int lengths[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t year = 1970;
    while (day >= 365 + leap(year)) {
        day -= 365 + leap(year);
        year++;
    }
    int month = 0;
    while (day >= lengths[month] + (month == 1 && leap(year))) {
        day -= lengths[month] + (month == 1 && leap(year));
        month++;
    }
    two(out, (int)(year / 100));
    two(out + 2, (int)(year % 100));
    out[4] = '-';
    two(out + 5, month + 1);
    out[7] = '-';
    two(out + 8, (int)day + 1);
}

/* The time `ns` as Loki's stamp into `out` (STAMP bytes); `day` and `date` keep the last day written, so that the
entries of one day (a node's, mostly) compute their date once. */
static void write_stamp(int64_t ns, char *out, int64_t *day, char *date) {
    int64_t seconds = ns / 1000000000;
    int64_t micro = ns / 1000 % 1000000;
    int64_t today = seconds / 86400;
    int64_t of_day = seconds % 86400;
    if (today != *day) {
        write_date(today, date);
        *day = today;
    }
    memcpy(out, date, 10);
    out[10] = 'T';
    two(out + 11, (int)(of_day / 3600));
    out[13] = ':';
    two(out + 14, (int)(of_day / 60 % 60));
    out[16] = ':';
    two(out + 17, (int)(of_day % 60));
    out[19] = '.';
    for (int i = 25; i >= 20; i--) {
        out[i] = (char)('0' + micro % 10);
        micro /= 10;
    }
    out[26] = 'Z';
}

/* Entry `i`'s time (0 or more, at most 2**63-1) and its line's UTF-8 bytes; 0, or -1 with an error set. */
static int entry(PyObject *entries, Py_ssize_t i, int64_t *ns, const char **text, Py_ssize_t *size) {
    PyObject *item = PyList_GET_ITEM(entries, i);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyLong_Check(PyTuple_GET_ITEM(item, 0)) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(item, 1))) {
        PyErr_SetString(PyExc_TypeError, "an entry is (its time as an int, its line as a str)");
        return -1;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 0), &overflow);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (overflow != 0 || value < 0) {
        PyErr_SetString(PyExc_ValueError, "a Loki time is 0 to 2**63-1 nanoseconds");
        return -1;
    }
    *ns = (int64_t)value;
    *text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(item, 1), size);
    return *text == NULL ? -1 : 0;
}

static PyObject *joined(PyObject *self, PyObject *entries) {
    (void)self;
    if (!PyList_Check(entries)) {
        PyErr_SetString(PyExc_TypeError, "entries must be a list of (time, line)");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(entries);
    if (count == 0) return PyBytes_FromStringAndSize(NULL, 0);
    /* The size first: each line behind its stamp and a blank, a newline between lines, each newline inside a line
    three bytes (U+FFFD) instead of one. */
    Py_ssize_t total = count - 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t ns;
        const char *text;
        Py_ssize_t size;
        if (entry(entries, i, &ns, &text, &size) != 0) return NULL;
        Py_ssize_t inner = 0;
        for (const char *at = text; (at = memchr(at, '\n', (size_t)(text + size - at))) != NULL; at++) inner++;
        if (size > PY_SSIZE_T_MAX - total - STAMP - 1 - 2 * inner) return PyErr_NoMemory();
        total += STAMP + 1 + size + 2 * inner;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    char *at = PyBytes_AS_STRING(out);
    int64_t day = -1;
    char date[10];
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t ns;
        const char *text;
        Py_ssize_t size;
        if (entry(entries, i, &ns, &text, &size) != 0) { /* as in the first pass: no Python code ran since */
            Py_DECREF(out);
            return NULL;
        }
        if (i > 0) *at++ = '\n';
        write_stamp(ns, at, &day, date);
        at += STAMP;
        *at++ = ' ';
        for (const char *end = text + size; text < end;) {
            const char *newline = memchr(text, '\n', (size_t)(end - text));
            const char *stop = newline == NULL ? end : newline;
            memcpy(at, text, (size_t)(stop - text));
            at += stop - text;
            if (newline == NULL) break;
            memcpy(at, "\xef\xbf\xbd", 3);
            at += 3;
            text = newline + 1;
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"joined", (PyCFunction)joined, METH_O,
     "joined(entries) -> bytes: the lines of [(ns, line), ...], each behind Loki's time and a blank, joined by "
     "newlines (a newline inside a line written U+FFFD), in UTF-8"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_loki_buffer",
    .m_doc = "A node's Loki entries as one buffer for the job-log reader.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__loki_buffer(void) { return PyModule_Create(&module_def); }
