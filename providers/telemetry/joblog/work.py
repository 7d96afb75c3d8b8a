"""The job-log rules' conclusions and their working state: what `rules.conclude` returns, and what its steps share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from providers.base import Evidence, cut_text
from providers.telemetry.joblog.records import (
    LogLine,
    NodeLog,
)

#: the evidence source of every job-log line
SOURCE = "joblog"
#: the OOM kill of a SIGKILLed rank is matched by pid, or by time: logged at most this long before the first
#: collector time on torchelastic's summary entry (torchelastic first stops the other workers, SIGTERM and up to
#: 30 s by default, then prints the summary) ...
OOM_KILL_BEFORE = timedelta(seconds=60)
#: ... and at most this long after it (the kernel's and the collector's clocks, and the order lines reach files)
OOM_KILL_AFTER = timedelta(seconds=5)

#: ProcessGroupNCCL's point-to-point work types: they are numbered by their own counter, which the group's
#: `last enqueued` / `last completed` numbers then mix with the collectives' (PyTorch's `pgStatus`)
P2P_OPS = frozenset({"SEND", "RECV", "RECVANYSOURCE"})
#: categories that show a node's own failure; the others may follow another node's failure
PRIMARY = frozenset({"gpu_memory", "nvlink", "gpu_unavailable", "gpu_driver", "host_oom"})
#: the job's own causes, in the order of the one ranking: a conclusion on the job's resources as a whole
JOB_CAUSES = ("configuration", "application", "scheduler")
#: the category of a node that shows a sign it cannot run the job as it is, when its signal table row names none
NODE_STATE_CATEGORY = "gpu_unavailable"


@dataclass(frozen=True)
class OomKill:
    """A kernel OOM-killer kill on a node, as the provider read it from that node's kernel log."""

    pid: int
    observed_at: datetime  # timezone-aware
    message: str  # the kernel line, shown as evidence
    source: str = "syslog"  # the kernel source's evidence token (`syslog` or `loki`)


@dataclass(frozen=True)
class NodeConclusion:
    node: str  # a node of scope.nodes, spelled as the scope spells it
    category: str
    observed_at: datetime | None  # the earliest collector time among its lines, None when none has one
    evidence: tuple[Evidence, ...]
    #: the signal table ids it was concluded from
    signals: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobConclusion:
    """A conclusion about the job's resources as a whole (`AllJobResources`)."""

    category: str  # `configuration`, `application`, `scheduler` or `collective_timeout`
    observed_at: datetime | None
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class JobLogConclusions:
    nodes: tuple[NodeConclusion, ...]  # at most one per node, in scope order
    job: JobConclusion | None  # only when no node conclusion stands
    #: per node, job-log lines that point at nothing by themselves (a CUDA error NVIDIA gives no cause for, a
    #: symptom another node's failure explains): evidence to show beside a kernel finding on that node, never a
    #: finding of their own (`Context`: a node's made when it is read)
    context: Mapping[str, tuple[Evidence, ...]]
    #: rank -> the one scope node its lines place it on
    placement: dict[int, str]
    #: ranks whose lines appear in more than one node's file: placed nowhere
    ambiguous_ranks: tuple[int, ...]
    #: sentences on what was not concluded and why; node names and ranks only, never log text
    notes: tuple[str, ...]
    #: per node, the ambiguous signals (signal table ids) its lines hold, which only the node's own kernel event in
    #: the window can settle
    unsettled: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the signal table ids behind the conclusions that stand (node and job)
    decided_by: tuple[str, ...] = ()
    #: the signal table ids whose lines were read and said to point at no node (configuration, ambiguous,
    #: consequence), in the notes
    noted: tuple[str, ...] = ()
    #: when no line of any node was understood: how many nodes' job logs held lines (0 otherwise)
    silence: int = 0
    #: the errors NVIDIA gives the program (a CUDA error of application meaning) as each rank raised them: what a
    #: comparison within the job reads (one GPU raising what the others, running the same code, do not)
    rank_errors: tuple[RankError, ...] = ()
    #: per node, the notes about its own signals (a signal that names no node by itself): a finding that names the node
    #: settles them
    node_notes: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class RankError:
    """An error of application meaning one rank (or an unprefixed process) of a node raised."""

    node: str
    rank: int | None
    signal: str  # the signal table row
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class History:
    """What earlier attempts of the workload add to the current one (`history.py`)."""

    #: nodes with an ambiguous signal now that an earlier attempt's node evidence names (not named otherwise)
    nodes: tuple[NodeConclusion, ...] = ()
    #: per node named now, the earlier attempts' ambiguous lines that corroborate it, with a sentence first
    extra: Mapping[str, tuple[Evidence, ...]] = field(default_factory=dict)
    #: sentences on what was not read
    notes: tuple[str, ...] = ()
    #: the earlier attempts whose logs were read
    attempts: tuple[int, ...] = ()


# ---------------------------------------------------------------- working types


class Item:
    """A line or sentence of evidence and the event it shows (`key`: items with the same key show the same event, one
    of them is shown first). An item made by `later` makes its evidence when it is first read: torchelastic's
    summary is kept as context for every node that printed one, and read only for the nodes a finding names."""

    __slots__ = ("_evidence", "_make", "key")

    def __init__(self, key: tuple[object, ...], evidence: Evidence) -> None:
        self.key = key
        self._evidence: Evidence | None = evidence
        self._make: Callable[[], Evidence] | None = None

    @classmethod
    def later(cls, key: tuple[object, ...], make: Callable[[], Evidence]) -> Item:
        item = cls.__new__(cls)
        item.key, item._evidence, item._make = key, None, make
        return item

    @property
    def evidence(self) -> Evidence:
        if self._evidence is None:
            assert self._make is not None
            self._evidence, self._make = self._make(), None
        return self._evidence

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Item):
            return NotImplemented
        return (self.key, self.evidence) == (other.key, other.evidence)

    __hash__ = None  # type: ignore[assignment]  # mutable once (its evidence made when read): not hashed

    def __repr__(self) -> str:
        return f"Item(key={self.key!r}, evidence={self.evidence!r})"


@dataclass
class Candidate:
    category: str
    items: list[Item] = field(default_factory=list)
    #: the signal table ids the candidate was concluded from
    signals: tuple[str, ...] = ()


class Kept:
    """Items kept as they come, as `rules._bounded` would keep them from the whole list: one per distinct event first
    (in order), then the repeats, no text twice, at most `limit`; an item's evidence is made only when it is kept. A
    job-wide conclusion over every rank of a large job costs a look at each line, not an object for each."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.first: list[Item] = []
        self.rest: list[Item] = []
        self._keys: set[tuple[object, ...]] = set()
        self._texts: set[str] = set()

    def add(self, key: tuple[object, ...], line: LogLine) -> None:
        text = cut_text(line.text)
        if text in self._texts:
            return
        self._texts.add(text)
        if key not in self._keys:
            self._keys.add(key)
            if len(self.first) < self.limit:
                self.first.append(Item(key, Evidence(SOURCE, text, line.observed_at)))
        elif len(self.first) + len(self.rest) < self.limit:
            self.rest.append(Item(key, Evidence(SOURCE, text, line.observed_at)))

    def items(self) -> list[Item]:
        return (self.first + self.rest)[: self.limit]


class Context(Mapping[str, tuple[Evidence, ...]]):
    """Each node's context: its items (in the order given) bounded by `bound`, made for a node when it is first read.
    Every node that printed torchelastic's summary has one; a request reads those of the nodes a finding names."""

    def __init__(self, items: Mapping[str, list[Item]], bound: Callable[[list[Item]], tuple[Evidence, ...]]) -> None:
        self._items = items
        self._bound = bound
        self._made: dict[str, tuple[Evidence, ...]] = {}

    def __getitem__(self, node: str) -> tuple[Evidence, ...]:
        made = self._made.get(node)
        if made is None:
            made = self._made[node] = self._bound(self._items[node])
        return made

    def __contains__(self, node: object) -> bool:
        return node in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


def line_evidence(line: LogLine) -> Evidence:
    return Evidence(SOURCE, cut_text(line.text), line.observed_at)


def said_evidence(message: str) -> Evidence:
    """A sentence the rules write (what the lines show together), not a log line."""
    return Evidence(SOURCE, cut_text(message))


@dataclass
class Work:
    scope_nodes: Sequence[str]
    scope_ranks: Sequence[int]
    logs: Mapping[str, NodeLog]
    oom_kills: Mapping[str, Sequence[OomKill]]
    max_evidence: int
    placement: dict[int, str] = field(default_factory=dict)
    ambiguous: dict[int, set[str]] = field(default_factory=dict)
    nodes: dict[str, list[Candidate]] = field(default_factory=dict)
    job: list[Candidate] = field(default_factory=list)
    context: dict[str, list[Item]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    timed_out: dict[int, tuple[str, LogLine]] = field(default_factory=dict)  # global rank -> (node, a line)
    #: global ranks and process groups that timed out on point-to-point work: their numbers are not compared
    p2p_ranks: set[int] = field(default_factory=set)
    p2p_groups: set[str] = field(default_factory=set)
    #: node -> ambiguous signal ids only the node's kernel event can settle
    unsettled: dict[str, list[str]] = field(default_factory=dict)
    #: signal ids read and said (in a note) to point at no node
    noted: list[str] = field(default_factory=list)
    #: node -> the signs it cannot run the job as it is (signal id, evidence), compared across the scope's nodes
    node_state: dict[str, list[tuple[str, list[Item]]]] = field(default_factory=dict)
    rank_errors: list[RankError] = field(default_factory=list)
    #: node -> the notes about its own signals
    node_notes: dict[str, list[str]] = field(default_factory=dict)

    def node(self, node: str, category: str, items: Iterable[Item], signals: Iterable[str] = ()) -> None:
        self.nodes.setdefault(node, []).append(Candidate(category, list(items), tuple(signals)))

    def note(self, message: str, signal: str | None = None, node: str | None = None) -> None:
        """A sentence on what was not concluded; `node`: it is about that node's signal (a finding that names the
        node later settles it, and the merge leaves it out)."""
        self.notes.append(message)
        if signal is not None:
            self.noted.append(signal)
        if node is not None:
            self.node_notes.setdefault(node, []).append(message)

    def add_context(self, node: str, items: Iterable[Item]) -> None:
        self.context.setdefault(node, []).extend(items)



def listing(values: Iterable[object], limit: int = 16) -> str:
    values = list(values)
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def or_unknown(value: object) -> str:
    return "?" if value is None else str(value)

