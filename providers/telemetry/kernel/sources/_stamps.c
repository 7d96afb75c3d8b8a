/* The kernel-log block's stamp facts, compiled: one walk over a block's bytes instead of a Python object per line.

A block (providers/telemetry/kernel/sources/blocks.py) is whole lines of one host's log. `analyse` keeps a summary of
it when it can be counted from its stamps: every line starts with a stamp of the file's one shape (search.Shape: the
date, a separator, the time of day, a fraction of `digits` digits behind its separator, the offset, then a blank),
the stamps are in order, their days exist, and the block is ASCII without NUL. `facts(view, sep, fraction_sep,
digits, offset)` finds that in one walk, a line at a time, and whether any `[seconds]` value (blocks.BRACKET: `[`,
blanks, digits, `.`, digits, `]`, anywhere on a line) is found twice; it returns (lines, first stamp, last stamp,
a value repeats) or None for a block that cannot be counted so, exactly as blocks.sorted_stamps and the BRACKET
search decide (tests/telemetry/test_stamp_facts.py compares them on generated blocks). Nothing is kept per line but a
pointer to the previous stamp and a table of the values seen. `repeated_lines` gives the lines holding a value found
twice, which are parsed one by one; `line_after` finds where a window's bound falls inside a block counted so, by
bisecting its bytes; `iso_time` reads the instant of the RFC 3339 stamp that starts a line the window's search
probes (search._line_time). */

#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* memrchr */
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int number(const unsigned char *p, int n) {
    int value = 0;
    for (int i = 0; i < n; i++) value = value * 10 + (p[i] - '0');
    return value;
}

/* The day exists in the proleptic Gregorian calendar (a year of 1 or more). */
static int day_exists(int year, int month, int day) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1 || month < 1 || month > 12 || day < 1) return 0;
    int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return day <= days[month - 1] + (month == 2 && leap);
}

/* The day `p` (`YYYY-MM-DD`, digits checked) exists, in years 2 to 9998 (what the line parser converts). */
static int valid_day(const unsigned char *p) {
    int year = number(p, 4);
    return year > 1 && year < 9999 && day_exists(year, number(p + 5, 2), number(p + 8, 2));
}

typedef struct {
    const char *sep, *fraction_sep, *offset;
    Py_ssize_t sep_len, fraction_sep_len, offset_len;
    int digits;
} Shape;

/* The length of the stamp starting at `p` with `room` bytes before the region's end (the blank behind it
   included in `room`, not in the length), or 0 when none starts there. */
static Py_ssize_t stamp_at(const unsigned char *p, Py_ssize_t room, const Shape *s) {
    Py_ssize_t n = 10 + s->sep_len + 8 + (s->digits ? s->fraction_sep_len + s->digits : 0) + s->offset_len;
    if (room < n + 1) return 0;
    static const char date[] = "dddd-dd-dd";
    for (int i = 0; i < 10; i++)
        if (date[i] == 'd' ? !is_digit(p[i]) : p[i] != '-') return 0;
    const unsigned char *q = p + 10;
    if (memcmp(q, s->sep, (size_t)s->sep_len) != 0) return 0;
    q += s->sep_len;
    /* (?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d */
    if (!((q[0] == '0' || q[0] == '1') ? is_digit(q[1]) : (q[0] == '2' && q[1] >= '0' && q[1] <= '3'))) return 0;
    if (q[2] != ':' || q[3] < '0' || q[3] > '5' || !is_digit(q[4])) return 0;
    if (q[5] != ':' || q[6] < '0' || q[6] > '5' || !is_digit(q[7])) return 0;
    q += 8;
    if (s->digits) {
        if (memcmp(q, s->fraction_sep, (size_t)s->fraction_sep_len) != 0) return 0;
        q += s->fraction_sep_len;
        for (int i = 0; i < s->digits; i++)
            if (!is_digit(q[i])) return 0;
        q += s->digits;
    }
    if (memcmp(q, s->offset, (size_t)s->offset_len) != 0) return 0;
    q += s->offset_len;
    if (*q != ' ' && *q != '\t' && *q != '\f' && *q != '\v') return 0;
    return n;
}

/* A set of byte strings (pointers into the block), open addressing. */
typedef struct {
    const unsigned char **keys;
    Py_ssize_t *lengths;
    Py_ssize_t count, mask;
} Values;

static uint64_t hash_of(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ull;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int values_init(Values *v) {
    v->count = 0;
    v->mask = 255;
    v->keys = PyMem_RawCalloc((size_t)(v->mask + 1), sizeof(*v->keys));
    v->lengths = PyMem_RawMalloc(sizeof(*v->lengths) * (size_t)(v->mask + 1));
    return v->keys && v->lengths ? 0 : -1;
}

static void values_free(Values *v) {
    PyMem_RawFree(v->keys);
    PyMem_RawFree(v->lengths);
}

static Py_ssize_t values_slot(const Values *v, const unsigned char *p, Py_ssize_t n, uint64_t h) {
    Py_ssize_t i = (Py_ssize_t)(h & (uint64_t)v->mask);
    while (v->keys[i] && !(v->lengths[i] == n && memcmp(v->keys[i], p, (size_t)n) == 0)) i = (i + 1) & v->mask;
    return i;
}

/* Add `p[:n]`: 1 when it was there already, 0 when added, -1 when memory ran out. */
static int values_add(Values *v, const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = values_slot(v, p, n, hash_of(p, n));
    if (v->keys[i]) return 1;
    v->keys[i] = p;
    v->lengths[i] = n;
    if (++v->count * 2 > v->mask + 1) { /* keep the table at most half full */
        Values grown = {NULL, NULL, v->count, v->mask * 2 + 1};
        grown.keys = PyMem_RawCalloc((size_t)(grown.mask + 1), sizeof(*grown.keys));
        grown.lengths = PyMem_RawMalloc(sizeof(*grown.lengths) * (size_t)(grown.mask + 1));
        if (!grown.keys || !grown.lengths) {
            values_free(&grown);
            return -1;
        }
        for (Py_ssize_t k = 0; k <= v->mask; k++) {
            if (!v->keys[k]) continue;
            Py_ssize_t j = values_slot(&grown, v->keys[k], v->lengths[k], hash_of(v->keys[k], v->lengths[k]));
            grown.keys[j] = v->keys[k];
            grown.lengths[j] = v->lengths[k];
        }
        values_free(v);
        *v = grown;
    }
    return 0;
}

/* The next `[seconds]` value of d[*at:n] (blocks.BRACKET: `[`, blanks, digits, `.`, digits, `]`; the search's
   matches do not overlap): 1 with where its digits start and their length, `*at` moved past it; 0 when none is left. */
static int next_value(const unsigned char *d, Py_ssize_t n, Py_ssize_t *at, Py_ssize_t *start, Py_ssize_t *length) {
    while (*at < n) {
        const unsigned char *open = memchr(d + *at, '[', (size_t)(n - *at));
        if (open == NULL) break;
        Py_ssize_t q = open - d + 1;
        while (q < n && d[q] == ' ') q++;
        Py_ssize_t value = q;
        while (q < n && is_digit(d[q])) q++;
        if (q > value && q < n && d[q] == '.') {
            q++;
            Py_ssize_t fraction = q;
            while (q < n && is_digit(d[q])) q++;
            if (q > fraction && q < n && d[q] == ']') {
                *start = value;
                *length = q - value;
                *at = q + 1;
                return 1;
            }
        }
        *at = open - d + 1;
    }
    *at = n;
    return 0;
}

/* Whether a `[seconds]` value of `d[0:n]` is found twice: 1, 0, or -1 when memory ran out. */
static int repeats(const unsigned char *d, Py_ssize_t n) {
    Values v;
    if (values_init(&v) < 0) {
        values_free(&v);
        return -1;
    }
    int found = 0;
    Py_ssize_t at = 0, start, length;
    while (next_value(d, n, &at, &start, &length)) {
        found = values_add(&v, d + start, length);
        if (found != 0) break;
    }
    values_free(&v);
    return found;
}

/* The newlines of p[0:n]. */
static Py_ssize_t newlines(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) count += p[i] == '\n';
    return count;
}

/* `repeated_lines(view)`: the indexes of the lines of `view` holding a `[seconds]` value found more than once in
   it, in order, each once (as the BRACKET pattern's matches give them): one walk puts each value in a table and the
   ones met again in a second, another takes the lines of the values in the second. */
static PyObject *repeated_lines(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "repeated_lines(view: bytes)");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), at = 0, start, length;
    Values seen, twice;
    int ok = values_init(&seen) == 0;
    ok = values_init(&twice) == 0 && ok;
    while (ok && next_value(d, n, &at, &start, &length)) {
        int added = values_add(&seen, d + start, length);
        ok = added >= 0 && (added == 0 || values_add(&twice, d + start, length) >= 0);
    }
    PyObject *found = ok ? PyList_New(0) : NULL;
    if (found != NULL && twice.count) {
        Py_ssize_t line = 0, counted = 0, last = -1;
        at = 0;
        while (next_value(d, n, &at, &start, &length)) {
            if (!twice.keys[values_slot(&twice, d + start, length, hash_of(d + start, length))]) continue;
            line += newlines(d + counted, start - counted);
            counted = start;
            if (line == last) continue;
            last = line;
            PyObject *index = PyLong_FromSsize_t(line);
            if (index == NULL || PyList_Append(found, index) < 0) {
                Py_XDECREF(index);
                Py_CLEAR(found);
                break;
            }
            Py_DECREF(index);
        }
    }
    values_free(&seen);
    values_free(&twice);
    if (!ok) return PyErr_NoMemory();
    return found;
}

static PyObject *facts(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || !PyBytes_Check(args[2]) ||
        !PyLong_Check(args[3]) || !PyBytes_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "facts(view: bytes, sep: bytes, fraction_sep: bytes, digits: int, offset: bytes)");
        return NULL;
    }
    Shape s;
    s.sep = PyBytes_AS_STRING(args[1]);
    s.sep_len = PyBytes_GET_SIZE(args[1]);
    s.fraction_sep = PyBytes_AS_STRING(args[2]);
    s.fraction_sep_len = PyBytes_GET_SIZE(args[2]);
    long digits = PyLong_AsLong(args[3]);
    if (digits == -1 && PyErr_Occurred()) return NULL;
    if (digits < 0 || digits > 9) {
        PyErr_SetString(PyExc_ValueError, "facts: digits must be 0 to 9");
        return NULL;
    }
    s.digits = (int)digits;
    s.offset = PyBytes_AS_STRING(args[4]);
    s.offset_len = PyBytes_GET_SIZE(args[4]);

    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    unsigned char outside = 0; /* a NUL, or a byte beyond ASCII: both are 0x7f or more once one is taken away */
    for (Py_ssize_t i = 0; i < size; i++) outside |= (unsigned char)(d[i] - 1) >= 0x7f;
    if (outside) Py_RETURN_NONE;
    /* The lines of view[:-1] (the view's last byte is its last line's newline). */
    Py_ssize_t n = size ? size - 1 : 0, pos = 0, count = 0, length = 0;
    const unsigned char *first = NULL, *previous = NULL;
    for (;;) {
        Py_ssize_t found = stamp_at(d + pos, n - pos, &s);
        if (found == 0) Py_RETURN_NONE; /* a line that does not start with a stamp of the shape */
        if (previous == NULL) {
            first = d + pos;
            length = found;
            if (!valid_day(d + pos)) Py_RETURN_NONE;
        } else {
            int order = memcmp(previous, d + pos, (size_t)length);
            if (order > 0) Py_RETURN_NONE; /* out of order */
            if (memcmp(previous, d + pos, 10) != 0 && !valid_day(d + pos)) Py_RETURN_NONE;
        }
        previous = d + pos;
        count++;
        const unsigned char *nl = memchr(d + pos, '\n', (size_t)(n - pos));
        if (nl == NULL) break;
        pos = nl - d + 1;
    }
    if (count < 3) Py_RETURN_NONE;
    int repeated = repeats(d, size);
    if (repeated < 0) return PyErr_NoMemory();
    return Py_BuildValue("(ny#y#O)", count, (const char *)first, length, (const char *)previous, length,
                         repeated ? Py_True : Py_False);
}

/* Days from 1970-01-01 to the civil date (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* `iso_time(raw)`: the instant, in microseconds since 1970-01-01T00:00:00Z, of the RFC 3339 stamp that starts the
   raw line `raw` as the line parser reads it (parse._ISO_AT_START and parse._from_iso: `YYYY-MM-DD`, `T` or a blank,
   `hh:mm:ss`, a fraction of 1 to 9 digits behind `.` or `,` cut to microseconds, `Z`, `z` or `+hh:mm`, `+hhmm`, `-`
   likewise, then a blank or a tab); None where that reading is not this one's to give: any other byte where one of
   those is expected, a day or time that does not exist, an offset of a day or more, an instant outside years 1 to
   9999 in UTC (the parser's reading of such a line, None or not, is then made by the parser itself). */
static PyObject *iso_time(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "iso_time(raw: bytes)");
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    if (n < 21) Py_RETURN_NONE;
    static const char shape[] = "dddd-dd-dd?dd:dd:dd";
    for (int i = 0; i < 19; i++) {
        if (shape[i] == 'd' ? !is_digit(p[i]) : shape[i] == '?' ? (p[i] != 'T' && p[i] != ' ') : p[i] != shape[i])
            Py_RETURN_NONE;
    }
    int year = number(p, 4), month = number(p + 5, 2), day = number(p + 8, 2);
    int hour = number(p + 11, 2), minute = number(p + 14, 2), second = number(p + 17, 2);
    if (!day_exists(year, month, day) || hour > 23 || minute > 59 || second > 59) Py_RETURN_NONE;
    Py_ssize_t q = 19;
    int64_t micro = 0;
    if (q < n && (p[q] == '.' || p[q] == ',')) {
        Py_ssize_t start = ++q;
        while (q < n && is_digit(p[q]) && q - start < 9) q++;
        Py_ssize_t digits = q - start;
        if (digits == 0 || (q < n && is_digit(p[q]))) Py_RETURN_NONE;
        for (Py_ssize_t i = 0; i < 6; i++) micro = micro * 10 + (i < digits ? p[start + i] - '0' : 0);
    }
    int64_t offset = 0; /* minutes east of UTC */
    if (q < n && (p[q] == 'Z' || p[q] == 'z')) {
        q++;
    } else if (q + 5 <= n && (p[q] == '+' || p[q] == '-') && is_digit(p[q + 1]) && is_digit(p[q + 2])) {
        Py_ssize_t m = q + 3 + (p[q + 3] == ':');
        if (m + 2 > n || !is_digit(p[m]) || !is_digit(p[m + 1])) Py_RETURN_NONE;
        offset = number(p + q + 1, 2) * 60 + number(p + m, 2);
        if (offset >= 24 * 60) Py_RETURN_NONE;
        if (p[q] == '-') offset = -offset;
        q = m + 2;
    } else {
        Py_RETURN_NONE;
    }
    if (q >= n || (p[q] != ' ' && p[q] != '\t')) Py_RETURN_NONE;
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset * 60;
    /* the instants of years 1 to 9999 in UTC (datetime's range) */
    if (seconds < days_from_civil(1, 1, 1) * 86400 || seconds >= days_from_civil(10000, 1, 1) * 86400)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)(seconds * 1000000 + micro));
}

/* `line_after(data, key, right, lines)`: (index, offset) of the first line of the block `data` (`lines` whole lines,
   its stamps in order) whose stamp is past `key` (`right`) or not before it; (lines, len(data)) when there is none.
   A bisection over byte offsets, each probe moved to the start of its line (a line's stamp compared as bytes, as
   the stamps' order is their bytes' order), then the newlines counted on the shorter side of the offset. */
static PyObject *line_after(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "line_after(data: bytes, key: bytes, right: bool, lines: int)");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *key = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]), width = PyBytes_GET_SIZE(args[1]);
    int right = PyObject_IsTrue(args[2]);
    if (right < 0) return NULL;
    Py_ssize_t lines = PyLong_AsSsize_t(args[3]);
    if (lines == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t lo = 0, hi = size; /* lo is always a line start; the answer lies in [lo, hi] */
    while (lo < hi) {
        Py_ssize_t middle = (lo + hi) / 2, at = lo;
        if (middle > lo) {
            const unsigned char *nl = memrchr(d + lo, '\n', (size_t)(middle - lo));
            if (nl != NULL) at = nl - d + 1;
        }
        Py_ssize_t have = size - at < width ? size - at : width;
        int order = memcmp(d + at, key, (size_t)have);
        if (order == 0 && have < width) order = -1; /* a shorter text before the key's end sorts first */
        if (right ? order <= 0 : order < 0) {
            const unsigned char *nl = memchr(d + at, '\n', (size_t)(size - at));
            if (nl == NULL) {
                PyErr_SetString(PyExc_ValueError, "line_after: the block's last line has no newline");
                return NULL;
            }
            lo = nl - d + 1;
        } else {
            hi = at;
        }
    }
    Py_ssize_t index = lo <= (size >> 1) ? newlines(d, lo) : lines - newlines(d + lo, size - lo);
    return Py_BuildValue("(nn)", index, lo);
}

static PyMethodDef methods[] = {
    {.ml_name = "line_after", .ml_meth = (PyCFunction)(void (*)(void))line_after, .ml_flags = METH_FASTCALL,
     .ml_doc = "line_after(data, key, right, lines) -> (index, offset): the first line whose stamp is past key "
               "(right) or not before it, by bisection over the block's bytes."},
    {.ml_name = "iso_time", .ml_meth = (PyCFunction)iso_time, .ml_flags = METH_O,
     .ml_doc = "iso_time(raw) -> microseconds since the epoch of the RFC 3339 stamp starting the line, or None."},
    {.ml_name = "repeated_lines", .ml_meth = (PyCFunction)repeated_lines, .ml_flags = METH_O,
     .ml_doc = "repeated_lines(view) -> list of the indexes of the lines holding a `[seconds]` value found twice."},
    {.ml_name = "facts", .ml_meth = (PyCFunction)(void (*)(void))facts, .ml_flags = METH_FASTCALL, .ml_doc =
     "facts(view, sep, fraction_sep, digits, offset) -> (lines, first_stamp, last_stamp, repeats) or None\n\n"
     "A kernel-log block's facts when every line of view[:-1] starts with a stamp of the shape, in order, on days "
     "that exist, the view ASCII without NUL, three lines at least; repeats: some `[seconds]` value is found twice."},
    {0},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_stamps",
    .m_doc = "The kernel-log block's stamp facts and a probed line's stamp, compiled.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__stamps(void) { return PyModule_Create(&module_def); }
