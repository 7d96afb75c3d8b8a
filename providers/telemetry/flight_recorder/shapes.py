"""Entries read by their shape: an entry whose bytes equal, but for its numbers, an entry read before is built at once.

A dump's entries repeat a few shapes: the same keys (memo references), the same operation, group and state names
(memo references), numbers of the same widths. When `unpickle.Reader` has read one entry opcode by opcode, its bytes
give a `Shape`: a pattern that every byte but the numbers' must equal, a `struct` layout that takes the numbers out
in one call, and how the entry's dict is built of them, of the memo's values and of the strings the entry stores.
An entry matching it is built without its opcodes being run one by one, to the same dict the reader would build:

- a shape is taken only from an entry the reader read without a refusal, that pushes one dict and uses nothing of
  the stack below it (no value it did not make, no mark it did not set), with only the opcodes of plain data the
  C++ pickler writes (no MEMOIZE, FRAME or BINUNICODE8), storing in the memo only strings and values it fetched;
- the only steps of that reading whose outcome depends on other bytes than those the pattern fixes are memo
  fetches (the index is fixed; the value is the memo's) and the reader's bounds: so an entry is built by its shape
  only when every value it fetches is in the memo and is a string, number, boolean or None, its stores stay within
  the memo's bound and its nesting within the reader's; otherwise `match` says no and the reader reads it.

The memo's values are fetched as the entry starts and its stores made after it is built, which is the reader's
order: a fetch after a store of the same index, within the entry, takes the stored value (resolved when the shape
is made). Dicts are built from their items in order (a key given twice keeps its last value, as SETITEMS does).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from providers.telemetry.flight_recorder.unpickle import Reader, _text

#: shapes kept per request, and those tried at one entry whose end is not known, at most
MAX_SHAPES = 256
MAX_TRIED = 8
#: bytes of one entry made a shape at most
MAX_SHAPE_BYTES = 4096

_F64 = struct.Struct(">d")
#: the types a fetched memo value may have for an entry to be built by its shape
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: opcodes with no argument: what each does to the stack is below
_PLAIN = frozenset(b"}])(useaN\x88\x89\x85\x86\x87t")
#: fixed-width numbers: opcode -> (bytes, struct code)
_NUMBERS = {0x4B: (1, "B"), 0x4D: (2, "H"), 0x4A: (4, "i")}
#: memo fetches and stores: opcode -> bytes of the index
_GETS = {0x68: 1, 0x6A: 4}
_PUTS = {0x71: 1, 0x72: 4}


class _Unshaped(Exception):
    """The entry's bytes do not make a shape (an opcode or use of the stack a shape does not cover)."""


class Shape:
    """One entry's shape: its pattern, the layout of its numbers, and how its dict is built."""

    __slots__ = ("length", "pattern", "numbers", "longs", "floats", "refs", "fetch", "consts", "builders", "keys",
                 "values", "puts", "stored", "depth")  # fmt: skip

    def __init__(self) -> None:
        self.length = 0
        self.pattern: re.Pattern[bytes] | None = None
        self.numbers: struct.Struct | None = None
        self.longs: list[int] = []  # number slots of LONG1 other than 8 bytes (bytes -> int)
        self.floats: list[int] = []  # number slots of BINFLOAT (big-endian bytes -> float)
        self.refs: tuple[int, ...] = ()  # memo indices fetched, in the order of their slots
        self.fetch: Callable[[dict], tuple] | None = None  # their values from a memo (KeyError when one is not there)
        self.consts: tuple[object, ...] = ()
        #: per container other than the entry's dict, innermost first: how it is built from the values
        self.builders: list[Callable[[list], object]] = []
        self.keys: Callable[[list], tuple] | None = None
        self.values: Callable[[list], tuple] | None = None
        self.puts: list[tuple[int, int]] = []  # (memo index, value slot), in order
        #: the same stores as (memo index, whether the value is fetched (else a constant), its place there)
        self.stored: list[tuple[int, bool, int]] = []
        self.depth = 1


def _getter(slots: list[int]) -> Callable[[Any], tuple]:
    if not slots:
        return lambda values: ()
    if len(slots) == 1:
        only = slots[0]
        return lambda values: (values[only],)
    return itemgetter(*slots)


def derive(data: bytes, start: int, end: int) -> Shape | None:
    """The shape of the entry the reader read from `data[start:end]` (one dict pushed), or None."""
    if end - start > MAX_SHAPE_BYTES:
        return None
    try:
        return _derive(data, start, end)
    except (_Unshaped, IndexError, struct.error, ValueError):
        return None


def _derive(data: bytes, start: int, end: int) -> Shape:  # noqa: C901, PLR0912, PLR0915
    shape = Shape()
    pattern = []
    layout = ["<"]
    number_slots = 0
    # Symbols: ("n", i) the i-th number; ("r", index) a memo value fetched as the entry starts; ("c", value) a
    # constant; ("l"|"t"|"d", items) containers (lists of symbols; a dict's are (key, value) pairs).
    refs: list[int] = []
    ref_slot: dict[int, int] = {}
    consts: list[object] = []
    stored: dict[int, tuple] = {}  # memo index -> the symbol stored there within the entry
    puts: list[tuple[int, tuple]] = []
    stack: list = []
    marks: list[int] = []
    pos = start

    def const(value: object) -> tuple:
        consts.append(value)
        return ("c", len(consts) - 1)

    while pos < end:
        op = data[pos]
        pos += 1
        pattern.append(re.escape(bytes([op])))
        layout.append("x")
        if op in _NUMBERS:
            size, code = _NUMBERS[op]
            pattern.append(b".{%d}" % size)
            layout.append(code)
            stack.append(("n", number_slots))
            number_slots += 1
            pos += size
        elif op == 0x8A:  # LONG1: its width is part of the shape
            n = data[pos]
            if n > 8:
                raise _Unshaped
            pattern.append(re.escape(bytes([n])) + (b".{%d}" % n if n else b""))
            layout.append("x")
            pos += 1
            if n == 0:
                stack.append(const(0))
            else:
                layout.append("q" if n == 8 else f"{n}s")
                if n != 8:
                    shape.longs.append(number_slots)
                stack.append(("n", number_slots))
                number_slots += 1
                pos += n
        elif op == 0x47:  # BINFLOAT
            pattern.append(b".{8}")
            layout.append("8s")
            shape.floats.append(number_slots)
            stack.append(("n", number_slots))
            number_slots += 1
            pos += 8
        elif op in _GETS:
            size = _GETS[op]
            index = int.from_bytes(data[pos : pos + size], "little")
            pattern.append(re.escape(data[pos : pos + size]))
            layout.append(f"{size}x")
            pos += size
            if index in stored:
                stack.append(stored[index])
            else:
                if index not in ref_slot:
                    ref_slot[index] = len(refs)
                    refs.append(index)
                stack.append(("r", ref_slot[index]))
        elif op in _PUTS:
            size = _PUTS[op]
            index = int.from_bytes(data[pos : pos + size], "little")
            pattern.append(re.escape(data[pos : pos + size]))
            layout.append(f"{size}x")
            pos += size
            if not stack or (marks and len(stack) == marks[-1]) or stack[-1][0] not in ("r", "c"):
                raise _Unshaped  # only strings and fetched values are stored by a shape
            stored[index] = stack[-1]
            puts.append((index, stack[-1]))
        elif op in (0x58, 0x8C):  # BINUNICODE, SHORT_BINUNICODE: the string is part of the shape
            size = 4 if op == 0x58 else 1
            n = int.from_bytes(data[pos : pos + size], "little")
            if pos + size + n > end:
                raise _Unshaped
            pattern.append(re.escape(data[pos : pos + size + n]))
            layout.append(f"{size + n}x")
            stack.append(const(_text(data, pos + size, n)))
            pos += size + n
        elif op in _PLAIN:
            _plain(op, stack, marks, const)
        else:
            raise _Unshaped
    if pos != end or marks or len(stack) != 1 or stack[0][0] != "d":
        raise _Unshaped
    shape.length = end - start
    shape.pattern = re.compile(b"".join(pattern), re.DOTALL)
    shape.numbers = struct.Struct("".join(layout))
    if shape.numbers.size != shape.length:
        raise _Unshaped
    shape.refs = tuple(refs)
    shape.fetch = _getter(refs)
    shape.consts = tuple(consts)
    _plan(shape, stack[0], number_slots, puts)
    return shape


def _plain(op: int, stack: list, marks: list[int], const: Callable[[object], tuple]) -> None:  # noqa: C901, PLR0912
    """What an opcode without an argument does to the symbols; `_Unshaped` where it would reach below the entry."""
    if op == 0x7D:  # EMPTY_DICT
        stack.append(("d", []))
    elif op == 0x5D:  # EMPTY_LIST
        stack.append(("l", []))
    elif op == 0x29:  # EMPTY_TUPLE
        stack.append(const(()))
    elif op == 0x28:  # MARK
        marks.append(len(stack))
    elif op == 0x4E:  # NONE
        stack.append(const(None))
    elif op == 0x88:
        stack.append(const(True))
    elif op == 0x89:
        stack.append(const(False))
    elif op in (0x75, 0x65):  # SETITEMS, APPENDS
        if not marks or marks[-1] < 1:
            raise _Unshaped
        at = marks.pop()
        target = stack[at - 1]
        items = stack[at:]
        del stack[at:]
        if op == 0x75:
            if target[0] != "d" or len(items) % 2:
                raise _Unshaped
            target[1].extend(zip(items[::2], items[1::2], strict=True))
        else:
            if target[0] != "l":
                raise _Unshaped
            target[1].extend(items)
    elif op in (0x73, 0x61):  # SETITEM, APPEND
        floor = marks[-1] if marks else 0
        need = 3 if op == 0x73 else 2
        if len(stack) - floor < need:
            raise _Unshaped
        if op == 0x73:
            value = stack.pop()
            key = stack.pop()
            if stack[-1][0] != "d":
                raise _Unshaped
            stack[-1][1].append((key, value))
        else:
            item = stack.pop()
            if stack[-1][0] != "l":
                raise _Unshaped
            stack[-1][1].append(item)
    elif op in (0x85, 0x86, 0x87):  # TUPLE1-3
        n = op - 0x84
        if len(stack) - (marks[-1] if marks else 0) < n:
            raise _Unshaped
        items = stack[-n:]
        del stack[-n:]
        stack.append(("t", items))
    elif op == 0x74:  # TUPLE
        if not marks:
            raise _Unshaped
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        stack.append(("t", items))
    else:
        raise _Unshaped


def _plan(shape: Shape, top: tuple, numbers: int, puts: list[tuple[int, tuple]]) -> None:
    """How the entry's dict is built: a list of values (the numbers, the memo values fetched, the constants, then
    each container as it is built, innermost first) and getters of each container's items from it."""
    base_refs = numbers
    base_consts = numbers + len(shape.refs)
    count = base_consts + len(shape.consts)
    depths: dict[int, int] = {}

    def slot(symbol: tuple) -> int:
        nonlocal count
        kind = symbol[0]
        if kind == "n":
            return symbol[1]
        if kind == "r":
            return base_refs + symbol[1]
        if kind == "c":
            return base_consts + symbol[1]
        if id(symbol) in depths:
            raise _Unshaped  # one container in two places: a shape builds each once
        items = symbol[1]
        if kind == "d":
            for k, _ in items:
                if k[0] in "ltd" or (k[0] == "c" and type(shape.consts[k[1]]) not in _SCALARS):
                    raise _Unshaped  # (the reader refuses such a key before a shape is made of it)
            keys = [slot(k) for k, _ in items]
            values = [slot(v) for _, v in items]
            inner = [k for k, _ in items] + [v for _, v in items]
        else:
            keys, values = [], [slot(v) for v in items]
            inner = list(items)
        depth = 1 + max((depths[id(s)] for s in inner if s[0] in "ltd"), default=0)
        depths[id(symbol)] = depth
        if symbol is top:
            shape.keys = _getter(keys)
            shape.values = _getter(values)
            shape.depth = depth
            return -1
        if kind == "d":
            getk, getv = _getter(keys), _getter(values)
            shape.builders.append(lambda vs, getk=getk, getv=getv: dict(zip(getk(vs), getv(vs), strict=True)))
        elif kind == "l" and len(values) == 1:
            only = values[0]
            shape.builders.append(lambda vs, only=only: [vs[only]])
        elif kind == "l":
            get = _getter(values)
            shape.builders.append(lambda vs, get=get: list(get(vs)))
        else:
            shape.builders.append(_getter(values))  # a tuple as it is
        count += 1
        return count - 1

    slot(top)
    shape.puts = [(index, slot(symbol)) for index, symbol in puts]
    shape.stored = [(index, at < base_consts, at - (base_refs if at < base_consts else base_consts))
                    for index, at in shape.puts]  # fmt: skip


def match(shape: Shape, data: bytes, pos: int, reader: Reader) -> dict | None:
    """The dict the entry at `pos` builds, when it has `shape` and the memo's values it fetches allow; its memo
    stores made. None when the reader must read it."""
    if shape.depth > reader.max_depth or shape.pattern.match(data, pos) is None:  # type: ignore[union-attr]
        return None
    memo = reader.memo
    try:
        fetched = shape.fetch(memo)  # type: ignore[misc]
    except KeyError:
        return None
    if not _SCALARS.issuperset(map(type, fetched)):
        return None
    if shape.puts and len(memo) + len(shape.puts) > reader.max_memo:
        return None
    values = list(shape.numbers.unpack_from(data, pos))  # type: ignore[union-attr]
    for i in shape.longs:
        values[i] = int.from_bytes(values[i], "little", signed=True)
    for i in shape.floats:
        values[i] = _F64.unpack(values[i])[0]
    values += fetched
    values += shape.consts
    for build in shape.builders:
        values.append(build(values))
    entry = dict(zip(shape.keys(values), shape.values(values), strict=False))  # type: ignore[misc]  (one length)
    for index, at in shape.puts:
        memo[index] = values[at]
    if shape.depth > 1:
        reader.depth[id(entry)] = shape.depth
    return entry


def store(shape: Shape, data: bytes, pos: int, reader: Reader) -> bool:
    """What `match` does but for building the dict: whether the entry at `pos` has `shape` and the memo's values it
    fetches allow, its memo stores made (an entry whose dict is not kept: the first entries of a large dump)."""
    if shape.depth > reader.max_depth or shape.pattern.match(data, pos) is None:  # type: ignore[union-attr]
        return False
    memo = reader.memo
    try:
        fetched = shape.fetch(memo)  # type: ignore[misc]
    except KeyError:
        return False
    if not _SCALARS.issuperset(map(type, fetched)):
        return False
    if shape.stored and len(memo) + len(shape.stored) > reader.max_memo:
        return False
    for index, is_fetched, at in shape.stored:
        memo[index] = fetched[at] if is_fetched else shape.consts[at]
    return True


class Shapes:
    """The shapes met in one request's dumps, by the length of their bytes (an entry's length is known when the
    next entry's start is), and the most recently made ones (for an entry whose end is not known)."""

    __slots__ = ("_by_length", "_recent", "_count", "_most")

    def __init__(self, most: int = MAX_SHAPES) -> None:
        self._by_length: dict[int, list[Shape]] = {}
        self._recent: list[Shape] = []
        self._count = 0
        self._most = most

    def find(self, data: bytes, pos: int, length: int | None, reader: Reader) -> tuple[dict, int] | None:
        """The dict built by the entry at `pos` (of `length` bytes, or not known) and its length, or None."""
        shapes = self._by_length.get(length, ()) if length is not None else self._recent
        for i, shape in enumerate(shapes):
            entry = match(shape, data, pos, reader)
            if entry is not None:
                if i:  # the shape met last is tried first next time (entries of one kind come in runs)
                    shapes.insert(0, shapes.pop(i))  # type: ignore[union-attr]
                return entry, shape.length
        return None

    def store(self, data: bytes, pos: int, length: int, reader: Reader) -> bool:
        """Whether the entry at `pos`, of `length` bytes, has a shape met before (its memo stores made)."""
        return any(store(shape, data, pos, reader) for shape in self._by_length.get(length, ()))

    def room(self) -> bool:
        """Whether another shape would be kept."""
        return self._count < self._most

    def add(self, shape: Shape) -> None:
        if self._count >= self._most:
            return
        self._by_length.setdefault(shape.length, []).insert(0, shape)
        self._recent.insert(0, shape)
        del self._recent[MAX_TRIED:]
        self._count += 1
