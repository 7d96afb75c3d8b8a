"""The job-log signal table: every failure signal the job-log reader recognises, loaded from `data/signals.csv`.

Each row names a signal, the literal markers a line must hold for it, how the reader parses such a line, what the
signal means (node evidence, the application, the job's configuration, ambiguous until corroborated, or a
consequence of another failure), the category it leads to and the public source of that meaning. The file's header
states the decision principle; `docs/job-logs.md` lists every row. The reader knows no signal the table lacks: the
markers are the only words it looks for, and the CUDA table (`cuda_errors.py`) is built from the rows parsed as
`cuda`.

`markers_in` finds the markers a line holds with one RE2 set of all of them (one pass over the line); `ANCHORS`, a
few short pieces of which every marker holds one, are what a backend that filters lines first (Loki's `|~`) is
asked for.
"""

from __future__ import annotations

import csv
import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import re2

from providers.telemetry.ranking import CATEGORY_RANK

SIGNALS_FILE = "signals.csv"
#: how a line is read once one of its markers is found (the file's `parse` column)
PARSES = frozenset({"cuda", "watchdog", "progress", "desync", "elastic", "nccl_net", "exception", "text"})
#: the length of the anchors the prefilter looks for first
ANCHOR_LENGTH = 4


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


@dataclass(frozen=True)
class Signal:
    """One row of the signal table."""

    id: str
    parse: str
    meaning: SignalMeaning
    category: str | None
    markers: tuple[str, ...]
    says: str
    never: str
    example: str
    source: str


class SignalTableError(ValueError):
    """The signal table breaks its own format (a packaging or editing mistake, found at import)."""


def parse_signals(text: str) -> tuple[Signal, ...]:
    """The rows of a signal table file, checked: unique ids, known parses and meanings, categories the ranking has."""
    reader = csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#"))
    rows: list[Signal] = []
    seen: set[str] = set()
    for number, raw in enumerate(reader, start=1):
        if None in raw or any(value is None for value in raw.values()):
            raise SignalTableError(f"row {number}: wrong number of columns")
        ident = raw["id"].strip()
        if not ident or ident in seen:
            raise SignalTableError(f"row {number}: missing or repeated id {ident!r}")
        seen.add(ident)
        try:
            meaning = SignalMeaning(raw["meaning"].strip())
        except ValueError:
            raise SignalTableError(f"{ident}: unknown meaning {raw['meaning']!r}") from None
        parse = raw["parse"].strip()
        if parse not in PARSES:
            raise SignalTableError(f"{ident}: unknown parse {parse!r}")
        category = raw["category"].strip() or None
        if category is not None and category not in CATEGORY_RANK:
            raise SignalTableError(f"{ident}: category {category!r} is not in the ranking")
        if meaning.names_node and category is None:
            raise SignalTableError(f"{ident}: a node signal needs a category")
        if meaning is SignalMeaning.APPLICATION and category != "application":
            raise SignalTableError(f"{ident}: an application signal's category is `application`")
        markers = tuple(m for m in raw["markers"].split("|"))
        if not markers or any(len(m.strip()) < 3 for m in markers):
            raise SignalTableError(f"{ident}: every marker needs at least three characters")
        for field in ("says", "never", "example", "source"):
            if not raw[field].strip():
                raise SignalTableError(f"{ident}: empty {field}")
        rows.append(
            Signal(ident, parse, meaning, category, markers, raw["says"].strip(), raw["never"].strip(),
                   raw["example"], raw["source"].strip())
        )
    if not rows:
        raise SignalTableError("the signal table is empty")
    return tuple(rows)


@functools.cache
def signal_table() -> tuple[Signal, ...]:
    """The table shipped beside this module."""
    text = resources.files("providers.telemetry.joblog").joinpath("data", SIGNALS_FILE).read_text(encoding="utf-8")
    return parse_signals(text)


def anchors_for(markers: Iterable[str]) -> tuple[str, ...]:
    """A few short substrings such that every marker holds at least one (a greedy cover by 4-character pieces).

    A line that holds none of them holds no marker. Pieces without a space are preferred, and among them those with
    a capital, a digit or a sign, which ordinary training output holds less often than lower-case words.
    """
    pending = set(markers)
    chosen: list[str] = []
    while pending:
        scores: dict[str, float] = {}
        for marker in pending:
            pieces = {marker[i : i + ANCHOR_LENGTH] for i in range(max(1, len(marker) - ANCHOR_LENGTH + 1))}
            for piece in pieces:
                scores[piece] = scores.get(piece, 0.0) + _weight(piece)
        best = max(sorted(scores), key=lambda piece: scores[piece])
        chosen.append(best)
        pending = {m for m in pending if best not in m}
    return tuple(chosen)


#: pieces ordinary training output holds on most lines (NCCL's INFO lines, PyTorch's C++ log lines): never anchors
COMMON_PIECES = frozenset({"NCCL", "INFO", "Proc", "rank", "Rank", "CUDA", "WARN"})


def _weight(piece: str) -> float:
    if " " in piece or piece in COMMON_PIECES:
        return 0.01
    if piece.isalpha() and piece.islower():
        return 1.0
    return 3.0


SIGNALS: tuple[Signal, ...] = signal_table()
BY_ID: dict[str, Signal] = {s.id: s for s in SIGNALS}
#: marker -> the signals that list it (a marker may be shared)
BY_MARKER: dict[str, tuple[Signal, ...]] = {}
for _signal in SIGNALS:
    for _marker in _signal.markers:
        BY_MARKER[_marker] = (*BY_MARKER.get(_marker, ()), _signal)
MARKERS: tuple[str, ...] = tuple(sorted(BY_MARKER, key=lambda m: (-len(m), m)))
#: the markers that say a line is about CUDA: a `cuda` row's runtime and driver names, and every marker of the row
#: for errors the table does not list; a `cuda` row's messages count only on a line that holds one of these
CUDA_CONTEXT: tuple[str, ...] = tuple(
    dict.fromkeys(
        m
        for s in SIGNALS
        if s.parse == "cuda"
        for m in s.markers
        if m.startswith(("cudaError", "CUDA_ERROR_", "CUDA ")) or s.id == "cuda_error_unlisted"
    )
)
#: markers a line must hold by itself: every marker, except `cuda` rows' messages (they need a context marker)
STANDALONE: tuple[str, ...] = tuple(
    m for m in MARKERS if m in CUDA_CONTEXT or any(s.parse != "cuda" for s in BY_MARKER[m])
)
ANCHORS: tuple[str, ...] = anchors_for(STANDALONE)


def _marker_set() -> re2.Set:
    found = re2.Set.SearchSet()
    for marker in MARKERS:
        found.Add(re2.escape(marker))
    found.Compile()
    return found


#: every marker of the table as one RE2 set: one pass over a line tells which of them it holds
_MARKER_SET = _marker_set()
_STANDALONE = frozenset(STANDALONE)
_ORDER = {m: i for i, m in enumerate(MARKERS)}


_CUDA_CONTEXT = frozenset(CUDA_CONTEXT)


def _held(hits: list[int]) -> list[str]:
    """The markers of a set match that count: a `cuda` row's message only beside a CUDA context marker."""
    found = [MARKERS[i] for i in hits]
    if _CUDA_CONTEXT.isdisjoint(found):
        found = [m for m in found if m in _STANDALONE]
    return found


def markers_in(text: str) -> tuple[str, ...]:
    """The markers `text` holds, in the order they first occur (a `cuda` row's message only beside a CUDA context
    marker)."""
    hits = _MARKER_SET.Match(text)
    if not hits:
        return ()
    found = _held(hits)
    found.sort(key=lambda m: (text.find(m), _ORDER[m]))
    return tuple(found)


@functools.lru_cache(maxsize=4096)
def _signals_of(hits: tuple[int, ...]) -> tuple[Signal, ...]:
    """The signals of a set match's markers (by their indices in MARKERS), in table order."""
    ids = {s.id for m in _held(list(hits)) for s in BY_MARKER[m]}
    return tuple(s for s in SIGNALS if s.id in ids)


def signals_in(text: str) -> tuple[Signal, ...]:
    """The signals whose markers `text` holds, in table order."""
    hits = _MARKER_SET.Match(text)
    if not hits:
        return ()
    return _signals_of(tuple(sorted(hits)))
