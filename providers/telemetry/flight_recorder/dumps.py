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

A large pickle is read from its ends (`read_tail`): what a hang is decided by are the newest entries. What the dumps
of one request share is read once (`ReadCache`): rank lists parsed once, large strings decoded once and reused when
their bytes compare equal, and entries built by their shape when an entry of the same shape was read (shapes.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

from providers.telemetry.flight_recorder.shapes import MAX_SHAPES, Shapes, derive
from providers.telemetry.flight_recorder.unpickle import MAX_DEPTH, Reader, Refused, Strings, Unknown

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
#: rank lists (as text) kept parsed per request, and their characters, at most (a job of 16,384 ranks in groups of
#: 8, 4 and 512 has about 6,200)
MAX_RANK_LISTS = 65536
MAX_RANK_LIST_CHARS = 32 * 1024 * 1024

STATES = ("scheduled", "started", "completed")


class Unreadable(Exception):
    """The file is not a dump this reader understands; the message says why."""


@dataclass(slots=True)
class Entry:
    """One recorded operation of one rank (not changed once read; not frozen, which makes each one four times as
    long to build)."""

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


_RANKS_TEXT = re.compile(r"\[(?:[0-9]{1,10}(?:, ?[0-9]{1,10})*)?\]")


class ReadCache:
    """What the dumps of one request share, read once: rank lists as text (2.1+ `pg_config`) parsed once, every dump
    of a job repeating the same ones (the default group's naming every rank); large strings decoded once and reused
    when their bytes compare equal (`unpickle.Strings`); the shapes of the entries read (shapes.py); how many bytes
    the last large pickle's head took and where its entries began."""

    def __init__(self, *, shapes: bool = True) -> None:
        self._parsed: dict[str, tuple[int, ...] | None] = {}
        self._chars = 0
        self.strings = Strings()
        #: bytes of the head the previous large pickle needed (its group table's size): the next is read as far
        self.head_bytes = WHOLE_BYTES
        #: where the previous large pickle's entries list began
        self.entries_at = 0
        #: the shapes of the entries read (shapes.py); `shapes` False: none kept, every entry read opcode by opcode
        self.shapes = Shapes(MAX_SHAPES if shapes else 0)

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
        if len(self._parsed) < MAX_RANK_LISTS and self._chars + len(value) <= MAX_RANK_LIST_CHARS:
            self._parsed[value] = parsed
            self._chars += len(value)
        return parsed


def _sizes(value: object) -> tuple[tuple[int, ...], ...] | None:
    if not isinstance(value, list) or len(value) > MAX_TENSORS:
        return None
    out = []
    for dims in value:
        if not isinstance(dims, list) or len(dims) > MAX_DIMS:
            return None
        for d in dims:
            if type(d) is not int:
                return None
        out.append(tuple(dims))
    return tuple(out)


def _dtypes(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or len(value) > MAX_TENSORS:
        return None
    for d in value:
        if not isinstance(d, str):
            return None
    return tuple([d[:MAX_NAME] for d in value])


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _groups(top: dict, cache: ReadCache) -> tuple[dict[str, tuple[str, tuple[int, ...] | None]], dict[int, str]]:
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
    if isinstance(op, Unknown) or isinstance(state, Unknown):
        raise _Unresolved()
    if isinstance(pg, (list, tuple)):
        for p in pg:
            if isinstance(p, Unknown):
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
    if not (isinstance(pg, (list, tuple)) and len(pg) == 2 and isinstance(pg[0], str) and isinstance(pg[1], str)):
        raise Unreadable("an entry's process_group is not a (name, description) pair")
    raw_seq = item.get("collective_seq_id")
    raw_p2p_seq = item.get("p2p_seq_id")
    seq = _int(raw_seq)
    p2p_seq = _int(raw_p2p_seq)
    is_p2p = item.get("is_p2p")
    if is_p2p is not None and type(is_p2p) is not bool:
        raise Unreadable("an entry's is_p2p flag is not a boolean")
    p2p = is_p2p if is_p2p is not None else _p2p_name(op)
    if (
        (seq is None and not p2p)
        or (raw_seq is not None and seq is None)
        or (raw_p2p_seq is not None and p2p_seq is None)
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


def dump_of(top: object, rank: int, cache: ReadCache, *, whole: bool = True, form: str = "pickle") -> Dump:
    """A decoded dump (pickle or JSON) as a `Dump`; Unreadable when its shape or types are not a dump's."""
    if not isinstance(top, dict):
        raise Unreadable("it is not a mapping")
    version = top.get("version")
    if not isinstance(version, str) or not re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}", version):
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


def read_json(data: bytes, rank: int, cache: ReadCache) -> Dump:
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


def read_pickle(data: bytes, rank: int, cache: ReadCache) -> Dump:
    """A whole pickled dump."""
    try:
        reader = Reader(data, strings=cache.strings)
        end = reader.run(0)
        if end != len(data):
            raise Unreadable(f"{len(data) - end} bytes follow the pickle's end")
        return dump_of(reader.stack[0], rank, cache)
    except Refused as exc:
        raise Unreadable(f"it is not a pickle of plain data ({exc})") from None
    except _Unresolved:
        raise Unreadable("its entries refer to values it never stores") from None


#: `"entries"` as the C++ pickler writes the key the first time, then its memo slot, the list and its mark (a list
#: that is shared, as in 1.4, is memoized after its end, so the mark follows the list directly)
_ENTRIES_NAME = b"X\x07\x00\x00\x00entries"
_ENTRIES_LIST = re.compile(rb"(?:q.|r....)\]\(", re.DOTALL)


def tail_pattern(head: bytes, near: int = 0) -> tuple[int, bytes] | None:
    """Where the entries list's first entry starts in `head`, and the bytes every later entry starts with: EMPTY_DICT,
    MARK and a reference to the memoized name of the entries' first key. None when `head` is not laid out so.

    The key is looked for from `near` on (where the previous dump's was, less a margin: a group table of a large job
    is most of the head), then from the start; the reading that follows checks every byte before it."""
    at = head.find(_ENTRIES_NAME, max(0, near))
    if near > 0 and at == -1:
        at = head.find(_ENTRIES_NAME)
    while at != -1:
        m = _ENTRIES_LIST.match(head, at + len(_ENTRIES_NAME))
        if m is not None:
            break
        at = head.find(_ENTRIES_NAME, at + 1)
    else:
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


def entries_begin(head: bytes, near: int = 0) -> bool:
    """Whether `head` reaches the start of the entries list's second entry (what `read_tail` needs of it)."""
    found = tail_pattern(head, near)
    return found is not None and head.find(found[1], found[0] + 1) != -1


def _starts_after(data: bytes, pattern: bytes, start: int, count: int) -> list[int]:
    """The first `count` places of `pattern` in `data` from `start` on, as `re.finditer` finds them (one after the
    end of the other)."""
    out = []
    at = data.find(pattern, start)
    while at != -1 and len(out) < count:
        out.append(at)
        at = data.find(pattern, at + len(pattern))
    return out


def _starts_before(data: bytes, pattern: bytes, count: int) -> list[int] | None:
    """The last `count` places of `pattern` in `data`, as `re.finditer` over the whole finds them, in order; None
    when `pattern` could overlap itself (then finding from the end may disagree: the caller finds them all)."""
    if any(pattern[i:] == pattern[: len(pattern) - i] for i in range(1, len(pattern))):
        return None
    out = []
    limit = len(data)
    while len(out) < count:
        at = data.rfind(pattern, 0, limit)
        if at == -1:
            break
        out.append(at)
        limit = at + len(pattern) - 1
    out.reverse()
    return out


def _entries(reader: Reader, data: bytes, starts: list[int], upto: int, shapes: Shapes) -> None:
    """Read the entries that start at `starts`, each up to where the next starts (the last up to `upto`): by their
    shape when an entry of the same shape was read before, else opcode by opcode (and its shape kept). Refused when
    a part cannot be read on its own (a start found inside a string): the caller then reads it all as one."""
    stack = reader.stack
    for i, pos in enumerate(starts):
        stop = starts[i + 1] if i + 1 < len(starts) else upto
        found = shapes.find(data, pos, stop - pos, reader)
        if found is not None:
            stack.append(found[0])
            continue
        height, marks = len(stack), len(reader.marks)
        reader.end = stop
        try:
            reader.run(pos, partial=True)
        finally:
            reader.end = len(data)
        if len(stack) == height + 1 and len(reader.marks) == marks and type(stack[-1]) is dict and shapes.room():
            shape = derive(data, pos, stop)
            if shape is not None:
                shapes.add(shape)


def _head(head: bytes, first: int, starts: list[int], cut: int, cache: ReadCache) -> Reader | None:
    """The reader after the part before the entries list and the first entries (up to `cut`), or None."""
    base = Reader(head, strings=cache.strings)
    try:
        base.end = first
        base.run(0, partial=True)
        base.end = len(head)
        # These entries are read for the names they store in the memo, and then taken off the stack: when every one
        # has a shape met before, its stores are made and its dict is not built (none of it is read by anything
        # else); when one has not, they are all read as usual from the memo as it was.
        bounds = [first, *starts, cut]
        memo = dict(base.memo)
        if all(cache.shapes.store(head, bounds[i], bounds[i + 1] - bounds[i], base) for i in range(len(bounds) - 1)):
            base.stack.extend([None] * (len(bounds) - 1))
        else:
            base.memo = memo
            _entries(base, head, bounds[:-1], cut, cache.shapes)
    except Refused:
        # read as one: a start found inside a string splits the bytes where no opcode ends
        base = Reader(head[:cut], strings=cache.strings)
        try:
            base.run(0, partial=True)
        except Refused:
            return None
    if not base.marks or base.marks[-1] >= len(base.stack) or type(base.stack[base.marks[-1] - 1]) is not list:
        return None
    del base.stack[base.marks[-1] :]
    return base


def _tail(base: Reader, tail: bytes, starts: list[int], cache: ReadCache) -> tuple[Reader, int]:
    """The reader after the tail from `starts[0]` to its STOP, and the offset after the STOP (Refused when it cannot
    be read)."""
    fast = True
    while True:
        reader = Reader(tail, tail=True, strings=cache.strings)
        reader.memo = dict(base.memo)
        reader.stack = list(base.stack)
        reader.marks = list(base.marks)
        reader.depth = dict(base.depth)
        reader.frozen = set(base.frozen)
        if not fast:
            end = reader.run(starts[0])
            break
        try:
            _entries(reader, tail, starts[:-1], starts[-1], cache.shapes)
            pos = starts[-1]
            found = cache.shapes.find(tail, pos, None, reader)
            if found is not None:
                reader.stack.append(found[0])
                pos += found[1]
            end = reader.run(pos)
            break
        except Refused:
            fast = False  # read as one from the first start: the same bytes, opcode by opcode
    return reader, end


def read_tail(
    head: bytes,
    tail: bytes,
    rank: int,
    cache: ReadCache,
    want: int = TAIL_ENTRIES,
    known: int = HEAD_ENTRIES,
    near: int = 0,
) -> Dump | None:
    """A large dump read from `head` (its first bytes, past the start of its entries list's second entry) and `tail`
    (its last bytes), or None when the tail holds too few entries or the layout is not PyTorch's (read more, or
    whole).

    The part before the entries list and the first `known` entries are read as usual: they hold the memo of the keys
    and of the names the job's loop uses. Then reading goes on at the start of the `want`-th newest entry, with the
    stack as it was at the list's start, so the entries before it are simply not there. A memo reference into the
    part skipped reads as `Unknown`: an entry that needs one makes it read four times as many of the first entries; a
    group whose oldest unfinished entry may lie further back, four times as many of the newest. Entries of a shape
    met before are built by it (shapes.py): the same dicts, fewer steps.
    """
    found = tail_pattern(head, near)
    if found is None:
        return None
    first, pattern = found
    cache.entries_at = first
    # The entries the head holds are read too (the keys, and the names a training loop uses, are stored in the memo
    # there), then taken off the stack: the list holds only the entries read from the tail.
    held = _starts_after(head, pattern, first + 1, known + 1)
    if not held:
        return None
    cut = held[min(known, len(held)) - 1]
    base = _head(head, first, held[: min(known, len(held)) - 1], cut, cache)
    if base is None:
        return None
    count = want
    starts = _starts_before(tail, pattern, count)
    everything = starts is None
    if everything:
        starts = [m.start() for m in re.finditer(re.escape(pattern), tail)]
    while count <= len(starts):  # type: ignore[arg-type]
        try:
            reader, end = _tail(base, tail, starts[-count:], cache)  # type: ignore[index]
            if end != len(tail):
                return None
            dump = dump_of(reader.stack[0], rank, cache, whole=False)
        except _Unresolved:
            # a name first stored after the head's entries read: read more of them, unless the head holds no more
            if known >= len(held):
                return None
            return read_tail(head, tail, rank, cache, want, known * 4, near)
        except (Refused, Unreadable):
            count *= 4
        else:
            if settled(dump):
                return dump
            count *= 4
        if not everything:
            starts = _starts_before(tail, pattern, count)
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
