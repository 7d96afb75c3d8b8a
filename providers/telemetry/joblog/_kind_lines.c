/* PyTorch's watchdog timeout and progress lines read in place: the job-log reader's most frequent decisive lines.

ProcessGroupNCCL prints them behind a rank prefix, one per rank and process group when a collective hangs:

    [rank3]:[E909 17:59:58.000414643 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation
        timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600067
        milliseconds before timing out.
    [rank3]:[E909 17:59:58.000465227 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 3] Exception
        (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last
        completed NCCL work: 1579.

`read(data, start, end, low, watchdog, max_chars)` reads the line `data[start:end]` (no newline) when the whole of it
is, in printable ASCII:

    [Loki's time and a blank]  `[rankN]:` [a blank]
    [the C++ log header: `[` I/W/E/F, 3-4 digits, a blank, hh:mm:ss.fraction (1-9 digits), a blank, [a thread id
     (1-10 digits) and a blank], a file name (a letter or `_`, then up to 63 of letters, digits, `_`, `.`), `:`,
     a line number (1-6 digits), `] `]
    the process-group marker: `[`, [`PG `, [`ID `], its id (1-9 digits), a blank, [`PG GUID ` and a GUID of 1-128
     characters (no blank, `[` or `]`) and a blank, or `(` a name of 1-128 characters (no `)`, `[` or `]`) `) `]],
     `Rank `, the rank in the group (1-9 digits), `] `
    and one of the two messages:
     - `Watchdog caught collective operation timeout: WorkNCCL(` [`SeqNum=` 1-19 digits `, `] `OpType=` the op (up to
       40 of A-Z and `_`, at least one), then any text up to the first `Timeout(ms)=`, 1-12 digits, `) ran for `,
       1-15 digits, ` milliseconds before timing out` [`.`];
     - `Exception (either an error or timeout) detected by watchdog at work` or `Timeout at NCCL work`, then `: `,
       `, last enqueued NCCL work: `, `, last completed NCCL work: ` each followed by a number (a sign, 1-19 digits)
       [`.`].

Digit runs are read greedily and never given back: a run longer than its bound fails the line, as a possessive
pattern would. The line is read only when it holds the message kind the caller expects (`watchdog` true for a
timeout, false for a progress line), is at most `max_chars` bytes, and the first match of a marker the caller's
search found in it (`low`, from the line's start) lies after the rank prefix. It returns None for any other line,
which the node parser then reads by itself; else the tuple `NodeParser.kind_lines` takes:

    (text, stamped, rank, head, group_rank, watchdog, values)

`head` the marker's text before `Rank ` (`[`, `[PG 1 `, `[PG ID 0 PG GUID 0(default_pg) `), `values` (seq or None,
op, timeout, ran) for a timeout and (work, enqueued, completed) for a progress line. tests/joblog/test_kind_lines.py
compares it with a regular expression of the same shape on generated lines and on each line one step off. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p; /* the next byte */
    const unsigned char *end;
} Cursor;

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* The literal `text` at the cursor: taken, 1; else 0 and the cursor where it was. */
static int take(Cursor *c, const char *text, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, text, n) != 0) return 0;
    c->p += n;
    return 1;
}

#define TAKE(c, lit) take((c), (lit), sizeof(lit) - 1)

static int take_byte(Cursor *c, unsigned char b) {
    if (c->p >= c->end || *c->p != b) return 0;
    c->p++;
    return 1;
}

/* A run of digits, greedy: at least `low`, and the run no longer than `high` (a longer one fails, never given back).
   Its span in `*from`, `*to`. */
static int digits(Cursor *c, int low, int high, const unsigned char **from, const unsigned char **to) {
    const unsigned char *s = c->p;
    while (c->p < c->end && is_digit(*c->p) && c->p - s < high) c->p++;
    if (c->p - s < low) return 0;
    if (from != NULL) {
        *from = s;
        *to = c->p;
    }
    return 1;
}

/* A run of digits whose next byte must be `after`: a run that reached its bound and goes on fails there. */
static int digits_then(Cursor *c, int low, int high, unsigned char after, const unsigned char **from,
                       const unsigned char **to) {
    return digits(c, low, high, from, to) && take_byte(c, after);
}

/* The number written by a digit run (at most 19 digits: it fits in 64 bits unsigned), negated when `negative`. */
static PyObject *number(const unsigned char *from, const unsigned char *to, int negative) {
    uint64_t value = 0;
    for (const unsigned char *q = from; q < to; q++) value = value * 10 + (uint64_t)(*q - '0');
    if (!negative) return PyLong_FromUnsignedLongLong(value);
    if (value <= (uint64_t)INT64_MAX) return PyLong_FromLongLong(-(int64_t)value);
    PyObject *magnitude = PyLong_FromUnsignedLongLong(value);
    if (magnitude == NULL) return NULL;
    PyObject *negated = PyNumber_Negative(magnitude);
    Py_DECREF(magnitude);
    return negated;
}

/* Bytes of a fixed shape, `d` for a digit and any other character for itself: taken, 1; else 0, the cursor unmoved. */
static int shaped(Cursor *c, const char *shape, size_t n) {
    if ((size_t)(c->end - c->p) < n) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = c->p[i];
        if (shape[i] == 'd' ? !is_digit(b) : b != (unsigned char)shape[i]) return 0;
    }
    c->p += n;
    return 1;
}

#define SHAPED(c, lit) shaped((c), (lit), sizeof(lit) - 1)

static int is_letter(unsigned char b) { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_'; }

/* The C++ log header and its blank, `[E909 17:59:58.000415432 [12345 ]ProcessGroupNCCL.cpp:616] `; the cursor
   unmoved when there is none. */
static void log_header(Cursor *c) {
    Cursor at = *c;
    if (!take_byte(&at, '[')) return;
    if (at.p >= at.end || (*at.p != 'I' && *at.p != 'W' && *at.p != 'E' && *at.p != 'F')) return;
    at.p++;
    if (!digits_then(&at, 3, 4, ' ', NULL, NULL)) return;
    if (!SHAPED(&at, "dd:dd:dd.") || !digits_then(&at, 1, 9, ' ', NULL, NULL)) return;
    Cursor thread = at;
    if (digits_then(&thread, 1, 10, ' ', NULL, NULL)) at = thread; /* a thread id */
    if (at.p >= at.end || !is_letter(*at.p)) return;
    const unsigned char *name = at.p++;
    while (at.p < at.end && (is_letter(*at.p) || is_digit(*at.p) || *at.p == '.') && at.p - name < 64) at.p++;
    if (!take_byte(&at, ':') || !digits_then(&at, 1, 6, ']', NULL, NULL) || !take_byte(&at, ' ')) return;
    *c = at;
}

/* A GUID's byte (no blank, `[` or `]`) and a name's within `(...)` (a blank allowed; no `)`, `[` or `]`). */
static int guid_byte(unsigned char b) { return b >= '!' && b <= '~' && b != '[' && b != ']'; }
static int name_byte(unsigned char b) { return b >= ' ' && b <= '~' && b != ')' && b != '[' && b != ']'; }

/* A run of 1 to 128 bytes of a class, greedy and never given back. */
static int run_of(Cursor *c, int (*in_class)(unsigned char)) {
    const unsigned char *s = c->p;
    while (c->p < c->end && in_class(*c->p) && c->p - s < 128) c->p++;
    return c->p > s;
}

/* The process-group marker up to the rank within the group: `[`, its optional `PG ...` part, `Rank N] `. */
static int group_marker(Cursor *c, const unsigned char **head_end, const unsigned char **rank_from,
                        const unsigned char **rank_to) {
    if (!take_byte(c, '[')) return 0;
    if (TAKE(c, "PG ")) {
        TAKE(c, "ID ");
        if (!digits_then(c, 1, 9, ' ', NULL, NULL)) return 0;
        if (TAKE(c, "PG GUID ")) {
            if (!run_of(c, guid_byte) || !take_byte(c, ' ')) return 0;
        } else if (take_byte(c, '(')) {
            if (!run_of(c, name_byte) || !TAKE(c, ") ")) return 0;
        }
    }
    *head_end = c->p;
    return TAKE(c, "Rank ") && digits_then(c, 1, 9, ']', rank_from, rank_to) && take_byte(c, ' ');
}

/* The timeout's message from `WorkNCCL(` on: (seq or None, op, timeout, ran), or NULL with no error set. */
static PyObject *timeout_values(Cursor *c) {
    const unsigned char *seq_from = NULL, *seq_to = NULL, *from, *to;
    if (!TAKE(c, "WorkNCCL(")) return NULL;
    if (TAKE(c, "SeqNum=") && !(digits(c, 1, 19, &seq_from, &seq_to) && TAKE(c, ", "))) return NULL;
    if (!TAKE(c, "OpType=")) return NULL;
    const unsigned char *op = c->p;
    while (c->p < c->end && ((*c->p >= 'A' && *c->p <= 'Z') || *c->p == '_') && c->p - op < 40) c->p++;
    const unsigned char *op_end = c->p;
    if (op_end == op) return NULL;
    /* any printable text up to the first `Timeout(ms)=` */
    for (;;) {
        if (c->p >= c->end || *c->p < ' ' || *c->p > '~') return NULL;
        if (*c->p == 'T' && TAKE(c, "Timeout(ms)=")) break;
        c->p++;
    }
    if (!digits_then(c, 1, 12, ')', &from, &to)) return NULL;
    const unsigned char *timeout_from = from, *timeout_to = to;
    if (!TAKE(c, " ran for ") || !digits(c, 1, 15, &from, &to)) return NULL;
    if (!TAKE(c, " milliseconds before timing out")) return NULL;
    take_byte(c, '.');
    if (c->p != c->end) return NULL;
    PyObject *seq = seq_from == NULL ? Py_NewRef(Py_None) : number(seq_from, seq_to, 0);
    PyObject *op_text = PyUnicode_DecodeASCII((const char *)op, op_end - op, NULL);
    PyObject *timeout = number(timeout_from, timeout_to, 0);
    PyObject *ran = number(from, to, 0);
    PyObject *out = NULL;
    if (seq != NULL && op_text != NULL && timeout != NULL && ran != NULL) out = PyTuple_Pack(4, seq, op_text, timeout, ran);
    Py_XDECREF(seq);
    Py_XDECREF(op_text);
    Py_XDECREF(timeout);
    Py_XDECREF(ran);
    return out;
}

/* A signed number: an optional `-`, 1 to 19 digits. */
static int signed_digits(Cursor *c, const unsigned char **from, const unsigned char **to, int *negative) {
    *negative = take_byte(c, '-');
    return digits(c, 1, 19, from, to);
}

/* The progress message after its head: (work, enqueued, completed), or NULL with no error set. */
static PyObject *progress_values(Cursor *c) {
    const unsigned char *from[3], *to[3];
    int negative[3];
    if (!TAKE(c, ": ") || !signed_digits(c, &from[0], &to[0], &negative[0])) return NULL;
    if (!TAKE(c, ", last enqueued NCCL work: ") || !signed_digits(c, &from[1], &to[1], &negative[1])) return NULL;
    if (!TAKE(c, ", last completed NCCL work: ") || !signed_digits(c, &from[2], &to[2], &negative[2])) return NULL;
    take_byte(c, '.');
    if (c->p != c->end) return NULL;
    PyObject *values[3];
    for (int i = 0; i < 3; i++) {
        values[i] = number(from[i], to[i], negative[i]);
        if (values[i] == NULL) {
            for (int j = 0; j < i; j++) Py_DECREF(values[j]);
            return NULL;
        }
    }
    PyObject *out = PyTuple_Pack(3, values[0], values[1], values[2]);
    for (int i = 0; i < 3; i++) Py_DECREF(values[i]);
    return out;
}

static PyObject *read_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "read(data, start, end, low, watchdog, max_chars) takes 6 arguments");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) != 0) return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t low = PyLong_AsSsize_t(args[3]);
    int watchdog = PyObject_IsTrue(args[4]);
    Py_ssize_t max_chars = PyLong_AsSsize_t(args[5]);
    PyObject *out = NULL;
    if (PyErr_Occurred() || watchdog < 0) goto done;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "start and end must lie within the data, start before end");
        goto done;
    }
    if (end - start > max_chars) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    Cursor c = {base + start, base + end};
    int stamped = SHAPED(&c, "dddd-dd-ddTdd:dd:dd.ddddddZ "); /* Loki's time and its blank */
    const unsigned char *rank_from, *rank_to, *group_from, *group_to, *head_end;
    if (!TAKE(&c, "[rank") || !digits_then(&c, 1, 9, ']', &rank_from, &rank_to) || !take_byte(&c, ':')) goto none;
    take_byte(&c, ' ');
    if (low < c.p - (base + start)) goto none; /* a marker inside the prefix */
    log_header(&c);
    const unsigned char *head = c.p;
    if (!group_marker(&c, &head_end, &group_from, &group_to)) goto none;
    PyObject *values = NULL;
    if (watchdog) {
        if (TAKE(&c, "Watchdog caught collective operation timeout: ")) values = timeout_values(&c);
    } else if (TAKE(&c, "Exception (either an error or timeout) detected by watchdog at work") ||
               TAKE(&c, "Timeout at NCCL work")) {
        values = progress_values(&c);
    }
    if (values == NULL) {
        if (PyErr_Occurred()) goto done;
        goto none;
    }
    PyObject *text = PyUnicode_DecodeASCII((const char *)base + start, end - start, NULL);
    PyObject *rank = number(rank_from, rank_to, 0);
    PyObject *head_text = PyUnicode_DecodeASCII((const char *)head, head_end - head, NULL);
    PyObject *group_rank = number(group_from, group_to, 0);
    if (text != NULL && rank != NULL && head_text != NULL && group_rank != NULL) {
        out = PyTuple_Pack(7, text, stamped ? Py_True : Py_False, rank, head_text, group_rank,
                           watchdog ? Py_True : Py_False, values);
    }
    Py_XDECREF(text);
    Py_XDECREF(rank);
    Py_XDECREF(head_text);
    Py_XDECREF(group_rank);
    Py_DECREF(values);
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {.ml_name = "read", .ml_meth = (PyCFunction)(void (*)(void))read_line, .ml_flags = METH_FASTCALL, .ml_doc =
     "read(data, start, end, low, watchdog, max_chars) -> (text, stamped, rank, head, group_rank, watchdog, values) "
     "or None\n\n"
     "The line data[start:end] read as PyTorch's watchdog timeout (watchdog true) or progress line (false), as "
     "NodeParser.kind_lines takes it; None when it is not one in that shape, is longer than max_chars, or holds the "
     "first marker the caller found (low bytes in) inside its rank prefix."},
    {0},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_kind_lines",
    .m_doc = "PyTorch's watchdog timeout and progress lines, read in place.",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__kind_lines(void) { return PyModule_Create(&module_def); }
