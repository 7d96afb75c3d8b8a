"""The job-log signal table: every failure signal the job-log reader recognises, loaded from the files of `data/`.

`data/signals.csv` holds the structural rows of PyTorch and its launcher (the watchdog's records, torchelastic's
summary, a traceback, PyTorch's quote of NCCL's last warning, ...); each other file is a catalogue taken whole from
a program's own source at a named release: `cuda.csv` (CUDA's runtime and driver error codes, cuBLAS's and cuDNN's
statuses, and the lines that print them), `nccl.csv` (`ncclResult_t` and every `WARN` format string of NCCL),
`ib.csv` (the verbs library's work completion statuses and asynchronous events, as NCCL prints them), `slurm.csv`
(Slurm's step, task and cancellation lines, `slurm_strerror`'s texts, the signal names srun prints), `mpi.csv` (Open
MPI, MPICH, UCX, PMIx) and `launchers.csv` (the elastic agents and launchers other than torchrun). Every row names
its signal, the literal markers a line must hold for it, how the reader parses such a line, what the signal means
(`SignalMeaning`), the category it leads to, what it never concludes and where it was read from. The loader checks
every file at import.

The reader knows no signal the table lacks: the markers are the only words it looks for (`STANDALONE`, which the
byte prefilter and the buffer search use; `ANCHORS`, a few short pieces of which every such marker holds one, for a
backend that filters lines first), a message row's matcher comes from its own format string (`formats.py`), and a
code is looked up in its catalogue's rows. A marker written `~text` counts only on a line that also holds a marker,
written without `~`, of a row of the same `parse` (a CUDA message such as `unknown error` only beside `CUDA error: `
or `Cuda failure `). `markers_in` finds the markers a line holds with one RE2 set of all of them.
"""

from __future__ import annotations

import enum
import functools
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import re2

from providers.telemetry.joblog.formats import FormatError, compile_format, conversions, literal_pieces
from providers.telemetry.ranking import CATEGORY_RANK
from providers.telemetry.reading import data_rows

#: the table's files, in the order their rows are listed
SIGNAL_FILES = ("signals.csv", "cuda.csv", "nccl.csv", "ib.csv", "slurm.csv", "mpi.csv", "launchers.csv")
#: the columns of `signals.csv`
SIGNAL_COLUMNS = ("id", "parse", "meaning", "category", "markers", "says", "never", "example", "source")
#: the columns of every catalogue file
CATALOGUE_COLUMNS = (
    "id", "catalogue", "parse", "meaning", "category", "markers", "format", "fields", "code", "value", "says",
    "never", "example", "release", "file", "source",
)
#: how a line is read once one of its markers is found (the `parse` column):
#: - `cuda`: a CUDA error, by its code's name, number or message where a CUDA context row puts it;
#: - `watchdog`, `progress`, `desync`: ProcessGroupNCCL's watchdog records; `elastic`: torchelastic's summary;
#:   `exception`: a Python traceback's last line; `last_error`: PyTorch's `Last error:`, whose next line is NCCL's
#:   last warning;
#: - `nccl`: an NCCL `WARN` (or failure `INFO`) line, read by the row whose format matches its message;
#: - `nccl_net`: the same for NCCL's network warnings, whose record (`NcclNetworkError`) also names the peer;
#: - `format`: a message found by its markers and read by its format (Slurm, MPI, launchers);
#: - `text`: the marker alone says it; `nccl_result`: the same for an `ncclResult_t` code (by its name or
#:   `ncclGetErrorString`'s text; the older short texts only beside an NCCL error's context);
#: - `value`: a code of a bounded enum (a signal, an errno, a work-completion status), never looked for by itself:
#:   read inside the line of the row whose `code` names its catalogue;
#: - `unread`: a row of a catalogue taken whole whose text holds nothing to find it by (NCCL's bare `-> %d`
#:   backtrace lines, a `%s` warning): listed, never read.
PARSES = frozenset({
    "cuda", "watchdog", "progress", "desync", "elastic", "exception", "last_error", "nccl", "nccl_net", "format",
    "text", "nccl_result", "value", "unread",
})
#: rows whose markers the reader never looks for
NOT_SEARCHED = frozenset({"value", "unread"})
#: the `# source:` lines a catalogue file's header must hold: what it was read from
SOURCE_PREFIX = "# source:"
#: the length of the anchors the prefilter looks for first
ANCHOR_LENGTH = 4
#: the length of the longer anchors taken where every short piece of a marker is also a piece of ordinary output
LONG_ANCHOR_LENGTH = 8
#: NCCL's INFO format strings (what `NCCL_DEBUG=INFO` output holds on most lines), which anchors avoid
ORDINARY_FILE = "nccl_info.csv"
#: a marker written so counts only beside another marker of a row of the same parse
CONTEXT_ONLY = "~"


class SignalMeaning(enum.StrEnum):
    """What a signal says about who failed."""

    NODE_HARDWARE = "node_hardware"  # a hardware or driver sign of the node that logged it
    LINK_FABRIC = "link_fabric"  # a link, NIC, NVLink/NVSwitch or fabric sign of the node that logged it
    #: the node cannot run the job as it is (a required daemon not running, a GPU that needs a reset, a driver older
    #: than the job's runtime, no usable device): it points at the nodes that show it while the scope's others do
    #: not; shown by every node that reported, it is the job's configuration
    NODE_STATE = "node_state"
    APPLICATION = "application"  # the program failed: the job's resources as a whole
    CONFIGURATION = "configuration"  # the job's configuration or environment: no node
    SCHEDULER = "scheduler"  # the workload manager's own action (time limit, preemption, cancellation): no node
    AMBIGUOUS = "ambiguous"  # no single cause: a node only with corroboration (its kernel event in the window)
    CONSEQUENCE = "consequence"  # follows another failure: names no node by itself

    @property
    def names_node(self) -> bool:
        """A sign of the node that logged it by itself (hardware, driver, link or fabric)."""
        return self in (SignalMeaning.NODE_HARDWARE, SignalMeaning.LINK_FABRIC)


#: the category a job-level meaning's rows carry
JOB_CATEGORY = {
    SignalMeaning.APPLICATION: "application",
    SignalMeaning.CONFIGURATION: "configuration",
    SignalMeaning.SCHEDULER: "scheduler",
}


@dataclass(frozen=True)
class Signal:
    """One row of the signal table."""

    id: str
    parse: str
    meaning: SignalMeaning
    category: str | None
    markers: tuple[str, ...]  # without the `~` of context-only markers
    says: str
    never: str
    example: str
    source: str
    #: the file the row is listed in, and for a catalogue's rows: the set it belongs to, the format its program
    #: prints, the names of the format's conversions a record keeps, the catalogue of its `code` field (and whether
    #: that code's row decides the line's meaning), the code's value, the release and file it was read from
    origin: str = "signals.csv"
    catalogue: str = ""
    format: str = ""
    fields: tuple[str, ...] = ()
    code: str = ""
    decides: bool = False
    value: str = ""
    release: str = ""
    file: str = ""
    context_only: frozenset[str] = frozenset()

    @property
    def searched(self) -> bool:
        """Whether the reader looks for the row's markers."""
        return self.parse not in NOT_SEARCHED


class SignalTableError(ValueError):
    """The signal table breaks its own format (a packaging or editing mistake, found at import)."""


def _header(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def parse_signals(text: str, origin: str = "signals.csv") -> tuple[Signal, ...]:
    """The rows of one file of the table, checked: its columns, known parses and meanings, categories the ranking
    has, markers, formats that compile with their fields, and a catalogue file's header naming its sources."""
    reader = data_rows(text)
    columns = tuple(reader.fieldnames or ())
    catalogue_file = origin != "signals.csv"
    expected = CATALOGUE_COLUMNS if catalogue_file else SIGNAL_COLUMNS
    if columns != expected:
        raise SignalTableError(f"{origin}: columns {columns!r}, expected {expected!r}")
    if catalogue_file:
        sources = [line for line in _header(text) if line.startswith(SOURCE_PREFIX)]
        if not sources or any(not all(w in s for w in ("release", "commit")) for s in sources):
            raise SignalTableError(f"{origin}: the header must name each source with its release and commit")
    rows: list[Signal] = []
    seen: set[str] = set()
    for number, raw in enumerate(reader, start=1):
        if None in raw or any(value is None for value in raw.values()):
            raise SignalTableError(f"{origin} row {number}: wrong number of columns")
        ident = raw["id"].strip()
        if not ident or ident in seen:
            raise SignalTableError(f"{origin} row {number}: missing or repeated id {ident!r}")
        seen.add(ident)
        rows.append(_row(origin, ident, raw, catalogue_file))
    if not rows:
        raise SignalTableError(f"{origin}: no rows")
    return tuple(rows)


def _row(origin: str, ident: str, raw: dict[str, str], catalogue_file: bool) -> Signal:
    where = f"{origin}: {ident}"
    try:
        meaning = SignalMeaning(raw["meaning"].strip())
    except ValueError:
        raise SignalTableError(f"{where}: unknown meaning {raw['meaning']!r}") from None
    parse = raw["parse"].strip()
    if parse not in PARSES:
        raise SignalTableError(f"{where}: unknown parse {parse!r}")
    category = raw["category"].strip() or None
    if category is not None and category not in CATEGORY_RANK:
        raise SignalTableError(f"{where}: category {category!r} is not in the ranking")
    if meaning.names_node and category is None:
        raise SignalTableError(f"{where}: a node signal needs a category")
    if meaning in JOB_CATEGORY and category != JOB_CATEGORY[meaning]:
        raise SignalTableError(f"{where}: a {meaning} signal's category is `{JOB_CATEGORY[meaning]}`")
    written = [m for m in raw["markers"].split("|") if m] if raw["markers"] else []
    context_only = frozenset(m[1:] for m in written if m.startswith(CONTEXT_ONLY))
    markers = tuple(m.removeprefix(CONTEXT_ONLY) for m in written)
    if parse != "unread" and not markers:
        raise SignalTableError(f"{where}: no marker")
    if any(len(m.strip()) < 3 for m in markers):
        raise SignalTableError(f"{where}: every marker needs at least three characters")
    for field in ("says", "never", "source"):
        if not raw[field].strip():
            raise SignalTableError(f"{where}: empty {field}")
    if parse not in NOT_SEARCHED and not raw["example"].strip():
        raise SignalTableError(f"{where}: empty example")
    if not catalogue_file:
        return Signal(ident, parse, meaning, category, markers, raw["says"].strip(), raw["never"].strip(),
                      raw["example"], raw["source"].strip(), context_only=context_only)
    fmt = raw["format"]
    fields = tuple(f.strip() for f in raw["fields"].split(",")) if raw["fields"].strip() else ()
    code = raw["code"].strip()
    decides = code.startswith("by:")
    code = code.removeprefix("by:")
    if parse in ("nccl", "nccl_net", "format") and not fmt:
        raise SignalTableError(f"{where}: a {parse} row needs its format")
    if fmt:
        try:
            compile_format(fmt, fields, slurm=raw["catalogue"].strip() in SLURM_STYLE)
        except FormatError as exc:
            raise SignalTableError(f"{where}: {exc}") from None
    if code and "code" not in fields:
        raise SignalTableError(f"{where}: a code catalogue without a `code` field")
    if "code" in fields and not code:
        raise SignalTableError(f"{where}: a `code` field without its catalogue")
    if not raw["release"].strip() or not raw["file"].strip() or not raw["catalogue"].strip():
        raise SignalTableError(f"{where}: empty catalogue, release or file")
    return Signal(
        ident, parse, meaning, category, markers, raw["says"].strip(), raw["never"].strip(), raw["example"],
        raw["source"].strip(), origin=origin, catalogue=raw["catalogue"].strip(), format=fmt, fields=fields,
        code=code, decides=decides, value=raw["value"].strip(), release=raw["release"].strip(),
        file=raw["file"].strip(), context_only=context_only,
    )


#: the `code` catalogue of CUDA's errors (the runtime's and the driver's codes, `cuda` rows of `cuda.csv`)
CUDA_CODES = "cuda"
#: the catalogue of NCCL's check sites whose failures NCCL's own text explains (`nccl.csv`): a `Cuda failure` warned
#: of there is read as the site's row when the CUDA error alone names no single cause
CHECK_SITE = "nccl_check_site"
#: catalogues whose formats use Slurm's own conversions (`%ps`, `%pJ`: a step or a job id)
SLURM_STYLE = frozenset({"srun", "slurmstepd", "sbatch", "salloc"})


def read_file(name: str) -> str:
    """The text of one file of the table, as shipped beside this module."""
    return resources.files("providers.telemetry.joblog").joinpath("data", name).read_text(encoding="utf-8")


@functools.cache
def signal_table() -> tuple[Signal, ...]:
    """Every row of every file, checked across files: ids unique, each `code` naming a catalogue of `value` rows
    (or CUDA's codes)."""
    rows = tuple(row for name in SIGNAL_FILES for row in parse_signals(read_file(name), name))
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise SignalTableError(f"{row.origin}: {row.id} repeats an id of another file")
        seen.add(row.id)
    codes = {row.catalogue for row in rows if row.parse in ("value", "nccl_result")} | {CUDA_CODES}
    for row in rows:
        if row.code and row.code not in codes:
            raise SignalTableError(f"{row.origin}: {row.id}: code catalogue {row.code!r} has no rows")
        if row.format and len(row.fields) > conversions(row.format, row.catalogue in SLURM_STYLE):
            raise SignalTableError(f"{row.origin}: {row.id}: more fields than conversions")
    return rows


def anchors_for(markers: Iterable[str], ordinary: str = "") -> tuple[str, ...]:
    """A few short substrings such that every marker holds at least one (a greedy cover by pieces of 4 and 8
    characters).

    A line that holds none of them holds no marker. No piece of `ordinary` (text that ordinary output holds on most
    lines: NCCL's INFO lines) is an anchor: a marker whose every piece is one is its own anchor. Among the other
    pieces (`_weight`): four characters with a capital, a digit or a sign first, then eight characters of the
    marker, then a lower-case word of four letters (`step`, `fail`: most English text holds them), and last four
    characters around a space; of two pieces that cover as much, the longer, then the first in text order. Each
    piece's score is kept and lowered as the markers it covers are covered (a heap of the scores), so the cover costs
    one pass over the markers' pieces, not one per anchor.
    """
    common = _ordinary_pieces(ordinary)
    own = {m: {p for p in _pieces(m) if not _is_ordinary(p, common, ordinary)} for m in set(markers)}
    chosen = sorted(m for m, pieces in own.items() if not pieces)
    pending = {m for m, pieces in own.items() if pieces}
    scores: dict[str, int] = {}
    holders: dict[str, list[str]] = {}
    for marker in pending:
        for piece in own[marker]:
            scores[piece] = scores.get(piece, 0) + _weight(piece)
            holders.setdefault(piece, []).append(marker)
    heap = [(-score, -len(piece), piece) for piece, score in scores.items()]
    heapq.heapify(heap)
    while pending:
        score, _, best = heapq.heappop(heap)
        if -score != scores[best]:  # lowered since it was pushed: back in at its score, or gone when nothing is left
            if scores[best] > 0:
                heapq.heappush(heap, (-scores[best], -len(best), best))
            continue
        chosen.append(best)
        for marker in holders[best]:
            if marker in pending:
                pending.discard(marker)
                for piece in own[marker]:
                    scores[piece] -= _weight(piece)
    return tuple(chosen)


def _pieces(marker: str) -> set[str]:
    """A marker's pieces of ANCHOR_LENGTH and LONG_ANCHOR_LENGTH characters (the marker itself where shorter)."""
    pieces = {marker[i : i + ANCHOR_LENGTH] for i in range(max(1, len(marker) - ANCHOR_LENGTH + 1))}
    if len(marker) > ANCHOR_LENGTH:
        pieces |= {marker[i : i + LONG_ANCHOR_LENGTH] for i in range(max(1, len(marker) - LONG_ANCHOR_LENGTH + 1))}
    return pieces


def _ordinary_pieces(ordinary: str) -> frozenset[str]:
    """Every piece of ANCHOR_LENGTH and LONG_ANCHOR_LENGTH characters `ordinary` holds."""
    return frozenset(
        ordinary[i : i + size]
        for size in (ANCHOR_LENGTH, LONG_ANCHOR_LENGTH)
        for i in range(len(ordinary) - size + 1)
    )


def _is_ordinary(piece: str, common: frozenset[str], ordinary: str) -> bool:
    if len(piece) in (ANCHOR_LENGTH, LONG_ANCHOR_LENGTH):
        return piece in common
    return piece in ordinary  # a marker shorter than a piece is its own piece


#: pieces ordinary training output holds on most lines (NCCL's INFO lines, PyTorch's C++ log lines): never anchors
COMMON_PIECES = frozenset({"NCCL", "INFO", "Proc", "rank", "Rank", "CUDA", "WARN"})


def _weight(piece: str) -> int:
    """How much a piece is worth as an anchor for each marker it covers (in hundredths)."""
    if len(piece) > ANCHOR_LENGTH:
        return 200
    if " " in piece or piece in COMMON_PIECES:
        return 1
    if piece.isalpha() and piece.islower():
        return 20
    return 300


def ordinary_text(table: Iterable[Signal]) -> str:
    """The literal parts of NCCL's INFO format strings (`data/nccl_info.csv`) that no row of `table` reads as its
    own, one per line: text that ordinary output holds and that says nothing about a failure."""
    own = {s.format for s in table if s.format}
    parts: list[str] = []
    for row in data_rows(read_file(ORDINARY_FILE)):
        if row["format"] not in own:
            parts += [part for part in literal_pieces(row["format"]) if part.strip()]
    return "\n".join(parts)


SIGNALS: tuple[Signal, ...] = signal_table()
BY_ID: dict[str, Signal] = {s.id: s for s in SIGNALS}
#: the rows the reader looks for (all but the codes read inside other rows' lines and the unread rows)
SEARCHED: tuple[Signal, ...] = tuple(s for s in SIGNALS if s.searched)
#: marker -> the searched rows that list it (a marker may be shared: NCCL's `NCCL WARN` by every WARN row)
BY_MARKER: dict[str, tuple[Signal, ...]] = {}
for _signal in SEARCHED:
    for _marker in _signal.markers:
        BY_MARKER[_marker] = (*BY_MARKER.get(_marker, ()), _signal)
MARKERS: tuple[str, ...] = tuple(sorted(BY_MARKER, key=lambda m: (-len(m), m)))
#: markers a line must hold by itself: every marker some row lists without `~`
STANDALONE: tuple[str, ...] = tuple(
    m for m in MARKERS if any(m not in s.context_only for s in BY_MARKER[m])
)
#: parse -> the standalone markers of its rows: a context-only marker of a row of that parse counts beside one
CONTEXT: dict[str, frozenset[str]] = {}
for _signal in SEARCHED:
    CONTEXT[_signal.parse] = CONTEXT.get(_signal.parse, frozenset()) | {
        m for m in _signal.markers if m not in _signal.context_only
    }
#: the markers that say a line is about CUDA (the standalone markers of the `cuda` rows)
CUDA_CONTEXT: tuple[str, ...] = tuple(m for m in STANDALONE if m in CONTEXT.get("cuda", ()))
ANCHORS: tuple[str, ...] = anchors_for(STANDALONE, ordinary_text(SIGNALS))
#: catalogue -> the rows of a code set, by the texts it is printed as and by its value
VALUES: dict[str, dict[str, Signal]] = {}
for _signal in SIGNALS:
    if _signal.parse in ("value", "nccl_result") and _signal.catalogue:
        _texts = VALUES.setdefault(_signal.catalogue, {})
        for _text in (*_signal.markers, _signal.value, _signal.id):
            if _text:
                _texts.setdefault(_text, _signal)


def value_row(catalogue: str, text: str) -> Signal | None:
    """The row of `catalogue` a code's text names: its name, its value, or the text it is printed as (the longest
    that starts the text: a signal's `Killed` before `(core dumped)`)."""
    table = VALUES.get(catalogue)
    if not table:
        return None
    text = text.strip()
    found = table.get(text)
    if found is not None:
        return found
    best = ""
    for key in table:
        if len(key) > len(best) and text.startswith(key) and not text[len(key) : len(key) + 1].isalnum():
            best = key
    return table[best] if best else None


#: the memory each RE2 program over the table's markers may take for its DFA (RE2's default is 8 MiB): the
#: alternation of every marker the readers search for outgrows the default, and RE2 then falls back to a search
#: about a hundred times slower (1.2 s against 9 ms over 1 MiB of training output, 303 markers)
RE2_MAX_MEM = 64 << 20


def re2_options() -> re2.Options:
    """RE2's options for the programs built from the table's markers."""
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    return options


def _marker_set() -> re2.Set:
    found = re2.Set.SearchSet(re2_options())
    for marker in MARKERS:
        found.Add(re2.escape(marker))
    found.Compile()
    return found


#: every marker of the table as one RE2 set: one pass over a line tells which of them it holds
_MARKER_SET = _marker_set()
_STANDALONE = frozenset(STANDALONE)
_ORDER = {m: i for i, m in enumerate(MARKERS)}
#: marker -> the parses it needs a context marker of (a context-only marker), or nothing
_NEEDS = {
    m: frozenset(s.parse for s in BY_MARKER[m] if m in s.context_only) for m in MARKERS if m not in _STANDALONE
}


def _held(hits: Iterable[int]) -> list[str]:
    """The markers of a set match that count: a context-only marker only beside a standalone marker of a row of
    its parse."""
    found = [MARKERS[i] for i in hits]
    standalone = [m for m in found if m in _STANDALONE]
    if len(standalone) == len(found):
        return found
    parses = {s.parse for m in standalone for s in BY_MARKER[m] if m not in s.context_only}
    return [m for m in found if m in _STANDALONE or not _NEEDS[m].isdisjoint(parses)]


def markers_in(text: str) -> tuple[str, ...]:
    """The markers `text` holds, in the order they first occur (a context-only marker only beside its context)."""
    hits = _MARKER_SET.Match(text)
    if not hits:
        return ()
    found = _held(hits)
    found.sort(key=lambda m: (text.find(m), _ORDER[m]))
    return tuple(found)


@dataclass(frozen=True)
class Hits:
    """The rows whose markers one line holds, in table order, and how they are read."""

    rows: tuple[Signal, ...]
    parses: frozenset[str]
    #: the rows read by their markers alone, and the message rows read by their formats
    text_rows: tuple[Signal, ...]
    format_rows: tuple[Signal, ...]


NO_HITS = Hits((), frozenset(), (), ())


@functools.lru_cache(maxsize=4096)
def _hits_of(hits: tuple[int, ...]) -> Hits:
    """The rows of a set match's markers (by their indices in MARKERS), in table order: a row by a marker it lists
    as context-only only beside a standalone marker of its own parse (`invalid argument` is a CUDA error's message
    beside `Cuda failure `, and NCCL's result only beside an NCCL error's own marker)."""
    found = _held(hits)
    parses = {s.parse for m in found if m in _STANDALONE for s in BY_MARKER[m] if m not in s.context_only}
    ids = {s.id for m in found for s in BY_MARKER[m] if m not in s.context_only or s.parse in parses}
    rows = tuple(s for s in SEARCHED if s.id in ids)
    return Hits(
        rows, frozenset(s.parse for s in rows), tuple(s for s in rows if s.parse in ("text", "nccl_result")),
        tuple(s for s in rows if s.parse == "format"),
    )


def hits_of(indices: tuple[int, ...]) -> Hits:
    """The rows of the markers a line holds, given as their indices in MARKERS, sorted, each once (a search that
    already found them, such as the buffer reader's, says which)."""
    return _hits_of(indices) if indices else NO_HITS


def hits_in(text: str) -> Hits:
    """The rows whose markers `text` holds, and how they are read."""
    hits = _MARKER_SET.Match(text)
    if not hits:
        return NO_HITS
    return _hits_of(tuple(sorted(hits)))


def signals_in(text: str) -> tuple[Signal, ...]:
    """The rows whose markers `text` holds, in table order."""
    return hits_in(text).rows
