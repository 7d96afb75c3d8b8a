"""One flight-recorder dump read into what the analysis needs: its groups, and its entries as typed records.

A dump is PyTorch's pickle (read by `unpickle.Reader`, which runs nothing) or its JSON (`*.json`, read by the
service's JSON codec); both become the same `Dump`, and a file of another shape, or of wrong types where it matters,
is `Unreadable` with a sentence naming what is wrong (never an excerpt). Versions, by the PyTorch release that
writes them (`FlightRecorder.hpp`, earlier `TraceUtils.h` / `NCCLUtils.hpp`):

- "1.4" (2.3): entries with `pg_id` and `seq_id` (one counter for collectives and point to point), `pg_config`
  `{pg_id: [ranks]}`: a group has no name that is the same on every rank, so it is known here by its ranks, and a
  group whose ranks another group of the same dump shares is left out (which of the two an entry is in cannot be
  told across ranks); its point-to-point entries are matched by their peer alone (their counter is the collectives');
- "2.1" (2.4): `process_group` (name, desc), `collective_seq_id`, `p2p_seq_id`, dtypes, `is_p2p`, `pg_config`
  `{name: {name, desc, ranks}}` with the ranks as text;
- "2.4" (2.5-2.7): `pg_status` and `timeout_ms`; "2.9" (2.8): thread id and name, and the gloo backend records
  too (its `pg_config` is one nameless group without ranks); "2.10" (2.9+): `comm_lib_version`.

A large pickle is read from its ends (`read_tail`): what a hang is decided by are the newest entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

from providers.telemetry.flight_recorder.unpickle import MAX_DEPTH, Reader, Refused, Unknown

#: a pickle of at most this many bytes is read whole (about 200 entries without stack frames); a larger one from its
#: end (`read_tail`)
WHOLE_BYTES = 32 * 1024
#: the part of a large pickle read before its entries list (version, group table, group status), at most
MAX_HEAD_BYTES = 4 * 1024 * 1024
#: newest entries of a large pickle read first; four times more each time a group's oldest unfinished entry lies
#: further back, up to the whole file
TAIL_ENTRIES = 8
#: oldest entries of a large pickle read with its head, for the names they store in the memo (a training loop names
#: its operations in its first steps); four times more when a newer entry refers to a name stored after them
HEAD_ENTRIES = 8
#: entries of one dump used at most, the newest (PyTorch keeps 2,000 unless told otherwise)
MAX_ENTRIES = 65536
#: tensors per entry and dimensions per tensor read (PyTorch records the tensors of one collective)
MAX_TENSORS = 1024
MAX_DIMS = 64
#: characters of an operation's, group's or description's name kept
MAX_NAME = 256

STATES = ("scheduled", "started", "completed")


class Unreadable(Exception):
    """The file is not a dump this reader understands; the message says why."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One recorded operation of one rank."""

    group: str  # the group's identity across ranks: its name, or (1.4) its ranks; "" when it cannot be told
    desc: str
    seq: int | None  # collective sequence number in its group; None for point to point
    p2p_seq: int | None  # point-to-point sequence number (2.1+), for point to point
    op: str  # profiling name: nccl:all_reduce, gloo:broadcast, nccl:send 0->3
    p2p: bool
    state: str
    retired: bool
    input_sizes: tuple[tuple[int, ...], ...] | None
    output_sizes: tuple[tuple[int, ...], ...] | None
    input_dtypes: tuple[str, ...] | None
    output_dtypes: tuple[str, ...] | None
    created_ns: int | None

    @property
    def done(self) -> bool:
        """Finished: completed; or, on a backend that records no events (gloo), retired, which is how its
        collectives end, well or with a timeout. An NCCL entry retired but not completed has timed out."""
        return self.state == "completed" or (self.retired and not self.op.startswith("nccl:"))


@dataclass
class Dump:
    rank: int
    version: str
    #: group identity -> (description, its global ranks in group order, or None when the dump does not say)
    groups: dict[str, tuple[str, tuple[int, ...] | None]]
    entries: list[Entry]
    #: whether `entries` are all of the dump's (a tail read leaves older ones unread)
    whole: bool = True
    form: str = "pickle"  # pickle or json
    #: first and last `time_created_ns` of the entries read
    span: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)


class _Unresolved(Exception):
    """A tail read met a memo reference into the part it skipped, in a field it needs: read further back."""


_RANKS_TEXT = re.compile(r"\[(?:\d{1,10}(?:, ?\d{1,10})*)?\]")


class RanksCache:
    """Rank lists as text (2.1+ `pg_config`) parsed once per request: every dump of a job repeats the same ones,
    the default group's naming every rank."""

    def __init__(self) -> None:
        self._parsed: dict[str, tuple[int, ...] | None] = {}

    def ranks(self, value: object) -> tuple[int, ...] | None:
        if isinstance(value, list):
            return tuple(value) if all(type(r) is int and r >= 0 for r in value) else None
        if not isinstance(value, str):
            return None
        if value in self._parsed:
            return self._parsed[value]
        parsed = None
        if len(value) <= 12 * 262144 and _RANKS_TEXT.fullmatch(value):
            inner = value[1:-1]
            parsed = tuple(int(r) for r in inner.split(",")) if inner else ()
        if len(self._parsed) < 4096:
            self._parsed[value] = parsed
        return parsed


def _sizes(value: object) -> tuple[tuple[int, ...], ...] | None:
    if not isinstance(value, list) or len(value) > MAX_TENSORS:
        return None
    out = []
    for dims in value:
        if not isinstance(dims, list) or len(dims) > MAX_DIMS or not all(type(d) is int for d in dims):
            return None
        out.append(tuple(dims))
    return tuple(out)


def _dtypes(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or len(value) > MAX_TENSORS or not all(isinstance(d, str) for d in value):
        return None
    return tuple(d[:MAX_NAME] for d in value)


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _groups(top: dict, cache: RanksCache) -> tuple[dict[str, tuple[str, tuple[int, ...] | None]], dict[int, str]]:
    """pg_config as {identity: (desc, ranks)}, and for 1.4 the pg_id -> identity map."""
    config = top.get("pg_config")
    groups: dict[str, tuple[str, tuple[int, ...] | None]] = {}
    by_id: dict[int, str] = {}
    if config is None:
        return groups, by_id
    if not isinstance(config, dict):
        raise Unreadable("its pg_config is not a mapping")
    if top.get("version") == "1.4":
        seen: dict[tuple[int, ...], list[int]] = {}
        for pg_id, ranks in config.items():
            r = cache.ranks(ranks)
            if type(pg_id) is int and r is not None:
                seen.setdefault(r, []).append(pg_id)
        for r, ids in seen.items():
            if len(ids) == 1:
                ident = "default" if ids[0] == 0 else "ranks " + span(r)
                groups[ident] = ("", r)
                by_id[ids[0]] = ident
        return groups, by_id
    for name, info in config.items():
        if not isinstance(name, str) or not isinstance(info, dict):
            raise Unreadable("an item of its pg_config is not a named mapping")
        if name == "":
            continue  # gloo records one nameless group without ranks: nothing to learn from it
        desc = info.get("desc")
        groups[name[:MAX_NAME]] = (desc[:MAX_NAME] if isinstance(desc, str) else "", cache.ranks(info.get("ranks")))
    return groups, by_id


def span(ranks: tuple[int, ...]) -> str:
    """Ranks as a short text: `0-15` for a run, else listed."""
    if len(ranks) > 2 and ranks == tuple(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


def _p2p_name(op: str) -> bool:
    return op.split(":", 1)[-1].split(" ", 1)[0] in ("send", "recv")


def _entry(item: object, version: str, by_id: dict[int, str]) -> Entry:
    if not isinstance(item, dict):
        raise Unreadable("an entry is not a mapping")
    op = item.get("profiling_name")
    state = item.get("state")
    pg = item.get("process_group")
    if (
        isinstance(op, Unknown)
        or isinstance(state, Unknown)
        or (isinstance(pg, (list, tuple)) and any(isinstance(p, Unknown) for p in pg))
    ):
        raise _Unresolved()
    if not isinstance(op, str) or state not in STATES:
        raise Unreadable("an entry has no operation name or no known state")
    # Fields the analysis can do without may be absent (a dump written by other tools than PyTorch); present, they
    # must have their type.
    retired = item.get("retired", False)
    if type(retired) is not bool:
        raise Unreadable("an entry's retired flag is not a boolean")
    created = _int(item.get("time_created_ns"))
    if version == "1.4":
        seq = _int(item.get("seq_id"))
        if seq is None:
            raise Unreadable("an entry's seq_id is not an integer")
        p2p = _p2p_name(op)
        ident = by_id.get(_int(item.get("pg_id")), "")  # type: ignore[arg-type]
        return Entry(
            ident,
            "",
            None if p2p else seq,
            None,
            op[:MAX_NAME],
            p2p,
            state,
            retired,
            _sizes(item.get("input_sizes")),
            _sizes(item.get("output_sizes")),
            None,
            None,
            created,
        )
    if not (isinstance(pg, (list, tuple)) and len(pg) == 2 and all(isinstance(p, str) for p in pg)):
        raise Unreadable("an entry's process_group is not a (name, description) pair")
    seq = _int(item.get("collective_seq_id"))
    p2p_seq = _int(item.get("p2p_seq_id"))
    is_p2p = item.get("is_p2p")
    if is_p2p is not None and type(is_p2p) is not bool:
        raise Unreadable("an entry's is_p2p flag is not a boolean")
    p2p = is_p2p if is_p2p is not None else _p2p_name(op)
    if (seq is None and not p2p) or any(
        item.get(k) is not None and _int(item.get(k)) is None for k in ("collective_seq_id", "p2p_seq_id")
    ):
        raise Unreadable("an entry's sequence numbers are not integers")
    return Entry(
        pg[0][:MAX_NAME],
        pg[1][:MAX_NAME],
        None if p2p else seq,
        p2p_seq if p2p else None,
        op[:MAX_NAME],
        p2p,
        state,
        retired,
        _sizes(item.get("input_sizes")),
        _sizes(item.get("output_sizes")),
        _dtypes(item.get("input_dtypes")),
        _dtypes(item.get("output_dtypes")),
        created,
    )


def dump_of(top: object, rank: int, cache: RanksCache, *, whole: bool = True, form: str = "pickle") -> Dump:
    """A decoded dump (pickle or JSON) as a `Dump`; Unreadable when its shape or types are not a dump's."""
    if not isinstance(top, dict):
        raise Unreadable("it is not a mapping")
    version = top.get("version")
    if not isinstance(version, str) or not re.fullmatch(r"\d{1,3}\.\d{1,3}", version):
        raise Unreadable("it has no version")
    groups, by_id = _groups(top, cache)
    raw = top.get("entries", [])
    if not isinstance(raw, list):
        raise Unreadable("its entries are not a list")
    more = len(raw) - MAX_ENTRIES
    entries = [_entry(item, version, by_id) for item in raw[-MAX_ENTRIES:]]
    times = [e.created_ns for e in entries if e.created_ns is not None]
    dump = Dump(rank, version, groups, entries, whole, form, (min(times), max(times)) if times else None)
    if more > 0:
        dump.notes.append(f"rank {rank}'s dump holds {len(raw)} entries: only its newest {MAX_ENTRIES} were used")
        dump.whole = False
    if version == "1.4" and isinstance(top.get("pg_config"), dict) and len(groups) < len(top["pg_config"]):
        dump.notes.append("groups that share their ranks with another group are not matched (a 1.4 dump names none)")
    return dump


def read_json(data: bytes, rank: int, cache: RanksCache) -> Dump:
    """A JSON dump (`_dump_nccl_trace_json` / `_dump_fr_trace_json`), read whole through the service's codec."""
    try:
        top = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise Unreadable("it is not JSON") from None
    if _depth(top) > MAX_DEPTH:
        raise Unreadable(f"it nests deeper than {MAX_DEPTH}")
    return dump_of(top, rank, cache, form="json")


def _depth(value: object) -> int:
    """Nesting depth, walked without recursion (orjson refuses nesting past 1024 itself)."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            if d <= MAX_DEPTH:
                todo.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return deepest


# ---------------------------------------------------------------- pickles


def read_pickle(data: bytes, rank: int, cache: RanksCache) -> Dump:
    """A whole pickled dump."""
    try:
        reader = Reader(data)
        end = reader.run(0)
        if end != len(data):
            raise Unreadable(f"{len(data) - end} bytes follow the pickle's end")
        return dump_of(reader.stack[0], rank, cache)
    except Refused as exc:
        raise Unreadable(f"it is not a pickle of plain data ({exc})") from None
    except _Unresolved:
        raise Unreadable("its entries refer to values it never stores") from None


#: `"entries"` as the C++ pickler writes the key the first time, its memo slot, then the list and its mark (a
#: list that is shared, as in 1.4, is memoized after its end, so the mark follows the list directly)
_ENTRIES_KEY = re.compile(rb"X\x07\x00\x00\x00entries(?:q.|r....)\]\(", re.DOTALL)


def tail_pattern(head: bytes) -> tuple[int, bytes] | None:
    """Where the entries list's first entry starts in `head`, and the bytes every later entry starts with: EMPTY_DICT,
    MARK and a reference to the memoized name of the entries' first key. None when `head` is not laid out so."""
    m = _ENTRIES_KEY.search(head)
    if m is None:
        return None
    first = m.end()
    if head[first : first + 3] != b"}(X" or len(head) < first + 7:
        return None
    klen = int.from_bytes(head[first + 3 : first + 7], "little")
    put = first + 7 + klen
    if head[put : put + 1] == b"q" and len(head) > put + 1:
        return first, b"}(h" + head[put + 1 : put + 2]
    if head[put : put + 1] == b"r" and len(head) >= put + 5:
        return first, b"}(j" + head[put + 1 : put + 5]
    return None


def entries_begin(head: bytes) -> bool:
    """Whether `head` reaches the start of the entries list's second entry (what `read_tail` needs of it)."""
    found = tail_pattern(head)
    return found is not None and head.find(found[1], found[0] + 1) != -1


def read_tail(
    head: bytes, tail: bytes, rank: int, cache: RanksCache, want: int = TAIL_ENTRIES, known: int = HEAD_ENTRIES
) -> Dump | None:
    """A large dump read from `head` (its first bytes, past the start of its entries list's second entry) and `tail`
    (its last bytes), or None when the tail holds too few entries or the layout is not PyTorch's (read more, or
    whole).

    The part before the entries list and the first `known` entries are read as usual: they hold the memo of the keys
    and of the names the job's loop uses. Then reading goes on at the start of the `want`-th newest entry, with the
    stack as it was at the list's start, so the entries before it are simply not there. A memo reference into the
    part skipped reads as `Unknown`: an entry that needs one makes it read four times as many of the first entries; a
    group whose oldest unfinished entry may lie further back, four times as many of the newest.
    """
    found = tail_pattern(head)
    if found is None:
        return None
    first, pattern = found
    # The entries the head holds are read too (the keys, and the names a training loop uses, are stored in the memo
    # there), then taken off the stack: the list holds only the entries read from the tail.
    held = [m.start() for m in re.finditer(re.escape(pattern), head[first + 1 :])]
    if not held:
        return None
    cut = first + 1 + held[min(known, len(held)) - 1]
    base = Reader(head[:cut])
    try:
        base.run(0, partial=True)
    except Refused:
        return None
    if not base.marks or base.marks[-1] >= len(base.stack) or type(base.stack[base.marks[-1] - 1]) is not list:
        return None
    del base.stack[base.marks[-1] :]
    starts = [m.start() for m in re.finditer(re.escape(pattern), tail)]
    count = want
    while count <= len(starts):
        reader = Reader(tail, tail=True)
        reader.memo = dict(base.memo)
        reader.stack = list(base.stack)
        reader.marks = list(base.marks)
        reader.depth = dict(base.depth)
        reader.frozen = set(base.frozen)
        try:
            end = reader.run(starts[-count])
            if end != len(tail):
                return None
            dump = dump_of(reader.stack[0], rank, cache, whole=False)
        except _Unresolved:
            # a name first stored after the head's entries read: read more of them, unless the head holds no more
            if known >= len(held):
                return None
            return read_tail(head, tail, rank, cache, want, known * 4)
        except (Refused, Unreadable):
            count *= 4
            continue
        if settled(dump):
            return dump
        count *= 4
    return None


def settled(dump: Dump) -> bool:
    """Whether every group of the entries read has a finished entry before its oldest unfinished one: nothing older
    changes what the analysis takes from the dump."""
    pending: set[str] = set()
    closed: set[str] = set()
    for e in dump.entries:
        if e.done:
            if e.group not in pending:
                closed.add(e.group)
        elif e.group not in closed:
            pending.add(e.group)
    return not pending
