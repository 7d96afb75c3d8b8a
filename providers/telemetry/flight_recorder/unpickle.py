"""A reader of pickle that builds plain data and nothing else: the flight recorder's dumps as data.

PyTorch writes a flight-recorder dump with TorchScript's C++ pickler (`torch/csrc/jit/serialization/pickler.cpp`,
called by `pickle_str`): protocol 2, dicts, lists and tuples of strings, integers, floats, booleans and None, each
string memoized by value (BINPUT after its first BINUNICODE, BINGET after), a container memoized when it is shared
(the stack frames of 1.4 and later, BINPUT after its last item). This reader accepts exactly the opcodes of such a
stream, and those Python's own pickler writes for the same plain data at protocols 2 to 5 (a container memoized when
it is made, MEMOIZE, FRAME, SHORT_BINUNICODE, BINUNICODE8), and refuses every other one (class lookups, reduce,
build, persistent ids, extension codes, buffers, ...) by raising `Refused` with the offset and the opcode's name:
nothing a file holds is called, imported or evaluated.

Bounds: the bytes handed in (the caller reads at most its file bound), the nesting depth of the value built, the
memo's size and every length field checked against the bytes that are left; the large strings kept for reuse across
the streams of a request (`Strings`: their count and bytes). A container fetched from the memo can
no longer be added to (a pickle of plain data refers back only to what it finished), so no value can contain
itself: what comes back is a finite tree, possibly sharing subtrees.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: nesting of containers in one value (a dump nests five deep: dump, entries, entry, sizes, one tensor's sizes)
MAX_DEPTH = 32
#: entries of the memo (every distinct string and shared container of a dump takes one)
MAX_MEMO = 1 << 20
#: a string of at least this many bytes is first looked up among the large strings decoded before (`Strings`)
LARGE_STRING = 1024
#: large strings kept for reuse, and their bytes, at most
MAX_LARGE_STRINGS = 256
MAX_LARGE_BYTES = 16 * 1024 * 1024

_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_F64 = struct.Struct(">d")
_U64 = struct.Struct("<Q")

#: names of the opcodes a refusal may name (pickletools' names; every other byte is "unknown")
_NAMES = {
    0x63: "GLOBAL",
    0x93: "STACK_GLOBAL",
    0x52: "REDUCE",
    0x62: "BUILD",
    0x69: "INST",
    0x6F: "OBJ",
    0x81: "NEWOBJ",
    0x92: "NEWOBJ_EX",
    0x50: "PERSID",
    0x51: "BINPERSID",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
    0x49: "INT",
    0x4C: "LONG",
    0x46: "FLOAT",
    0x53: "STRING",
    0x54: "BINSTRING",
    0x55: "SHORT_BINSTRING",
    0x56: "UNICODE",
    0x70: "PUT",
    0x67: "GET",
    0x32: "DUP",
    0x30: "POP",
    0x31: "POP_MARK",
    0x8B: "LONG4",
    0x96: "BYTEARRAY8",
    0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
    0x42: "BINBYTES",
    0x43: "SHORT_BINBYTES",
    0x8E: "BINBYTES8",
    0x8F: "EMPTY_SET",
    0x90: "ADDITEMS",
    0x91: "FROZENSET",
    0x64: "DICT",
    0x6C: "LIST",
    0x72: "LONG_BINPUT",
}


class Refused(Exception):
    """The bytes are not a pickle of plain data this reader accepts; the message says where and why."""


@dataclass(frozen=True)
class Unknown:
    """A memo reference made before the part of the stream that was read (a tail read): its value is not known."""

    index: int


def opcode_name(op: int) -> str:
    return _NAMES.get(op, f"opcode 0x{op:02x}")


class Strings:
    """Large strings decoded once and reused across the streams of one request: a group table's rank list repeats
    byte for byte in every dump of a job (the default group's names every rank). A string is reused only when the
    bytes it is read from compare equal, byte for byte, to those it was decoded from; the text is then the same."""

    __slots__ = ("_seen", "_bytes")

    def __init__(self) -> None:
        self._seen: dict[tuple[int, bytes], list[tuple[bytes, str]]] = {}
        self._bytes = 0

    def text(self, data: bytes, pos: int, n: int) -> str:
        key = (n, data[pos : pos + 64])
        kept = self._seen.get(key)
        if kept is not None:
            for raw, text in kept:
                if data.startswith(raw, pos):
                    return text
        text = _text(data, pos, n)
        if self._bytes + n <= MAX_LARGE_BYTES and (len(self._seen) < MAX_LARGE_STRINGS or kept is not None):
            if kept is None:
                kept = self._seen[key] = []
            if len(kept) < 4:
                kept.append((data[pos : pos + n], text))
                self._bytes += n
        return text


class Reader:
    """One stream's state: the value stack, the marks, the memo; `run` executes opcodes from `pos` until STOP.

    `tail` True: a reference to a memo entry this reader never saw gives `Unknown(index)` instead of a refusal (the
    stream was entered in its middle; see dumps.py).
    """

    __slots__ = (
        "data", "end", "stack", "marks", "memo", "frozen", "depth", "tail", "max_depth", "max_memo", "strings",
    )  # fmt: skip

    def __init__(
        self,
        data: bytes,
        *,
        tail: bool = False,
        max_depth: int = MAX_DEPTH,
        max_memo: int = MAX_MEMO,
        strings: Strings | None = None,
    ) -> None:
        self.data = data
        self.end = len(data)
        self.stack: list = []
        self.marks: list[int] = []
        self.memo: dict[int, object] = {}
        #: ids of containers that were memoized (no longer added to), and of every container their nesting depth
        self.frozen: set[int] = set()
        self.depth: dict[int, int] = {}
        self.tail = tail
        self.max_depth = max_depth
        self.max_memo = max_memo
        #: large strings decoded before, reused when their bytes compare equal
        self.strings = strings

    # The loop is one function with the opcodes in the order a dump uses them most: per opcode it does a comparison
    # chain and a few list operations, no call.
    def run(self, pos: int, *, partial: bool = False) -> int:  # noqa: C901, PLR0912, PLR0915
        """Execute from `pos` until STOP; return the offset after it. `partial`: the bytes end on purpose before
        the STOP (the part of a dump before its entries, `dumps.read_tail`): return the end offset there."""
        data = self.data
        end = self.end
        stack = self.stack
        marks = self.marks
        memo = self.memo
        frozen = self.frozen
        depth = self.depth
        max_depth = self.max_depth
        max_memo = self.max_memo
        strings = self.strings
        while pos < end:
            op = data[pos]
            pos += 1
            if op == 0x68:  # BINGET
                if pos >= end:
                    break
                value = memo.get(data[pos], _MISSING)
                if value is _MISSING:
                    value = self._get(data[pos], pos)
                elif type(value) in _MUTABLE:
                    frozen.add(id(value))
                stack.append(value)
                pos += 1
            elif op == 0x28:  # MARK
                marks.append(len(stack))
            elif op == 0x71:  # BINPUT (`_put`, inline: a dump stores every new string)
                if pos >= end:
                    break
                if not stack or len(stack) == (marks[-1] if marks else 0):
                    raise Refused(f"a memo store with nothing to store at offset {pos - 1}")
                index = data[pos]
                if index not in memo and len(memo) >= max_memo:
                    raise Refused(f"more than {max_memo} memo entries at offset {pos - 1}")
                memo[index] = stack[-1]
                pos += 1
            elif op == 0x58:  # BINUNICODE
                if pos + 4 > end:
                    break
                (n,) = _U32.unpack_from(data, pos)
                pos += 4
                if n > end - pos:
                    raise Refused(f"a string of {n} bytes at offset {pos - 5} runs past the end")
                if n >= LARGE_STRING and strings is not None:
                    stack.append(strings.text(data, pos, n))
                else:
                    stack.append(data[pos : pos + n].decode("utf-8", "backslashreplace"))  # `_text`, inline
                pos += n
            elif op == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif op == 0x65:  # APPENDS
                if not marks:
                    raise Refused(f"APPENDS without a mark at offset {pos - 1}")
                at = marks[-1]
                marks.pop()
                if at < 1:
                    raise Refused(f"APPENDS with nothing to append to at offset {pos - 1}")
                target = stack[at - 1]
                if type(target) is not list or id(target) in frozen:
                    raise Refused(f"APPENDS to a {_kind(target, frozen)} at offset {pos - 1}")
                items = stack[at:]
                del stack[at:]
                if items:
                    d = depth.get(id(target), 1)
                    for item in items:
                        if type(item) in _CONTAINERS:
                            d = max(d, depth.get(id(item), 1) + 1)
                    if d > max_depth:
                        raise Refused(f"containers nest deeper than {max_depth} at offset {pos - 1}")
                    depth[id(target)] = d
                    target.extend(items)
            elif op == 0x4D:  # BININT2
                if pos + 2 > end:
                    break
                stack.append(_U16.unpack_from(data, pos)[0])
                pos += 2
            elif op == 0x4B:  # BININT1
                if pos >= end:
                    break
                stack.append(data[pos])
                pos += 1
            elif op == 0x4A:  # BININT
                if pos + 4 > end:
                    break
                stack.append(_I32.unpack_from(data, pos)[0])
                pos += 4
            elif op == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif op == 0x75:  # SETITEMS
                if not marks:
                    raise Refused(f"SETITEMS without a mark at offset {pos - 1}")
                at = marks.pop()
                if at < 1:
                    raise Refused(f"SETITEMS with nothing to set in at offset {pos - 1}")
                target = stack[at - 1]
                if type(target) is not dict or id(target) in frozen:
                    raise Refused(f"SETITEMS on a {_kind(target, frozen)} at offset {pos - 1}")
                items = stack[at:]
                del stack[at:]
                if len(items) % 2:
                    raise Refused(f"SETITEMS with an odd number of items at offset {pos - 1}")
                self._setitems(target, items, pos - 1)
            elif op == 0x4E:  # NONE
                stack.append(None)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x86:  # TUPLE2
                if len(stack) - (marks[-1] if marks else 0) < 2:
                    raise Refused(f"TUPLE2 with fewer than two items at offset {pos - 1}")
                b = stack.pop()
                a = stack.pop()
                stack.append(self._tuple((a, b), pos - 1))
            elif op == 0x8A:  # LONG1
                if pos >= end:
                    break
                n = data[pos]
                pos += 1
                if n > 8:
                    raise Refused(f"an integer of {n} bytes at offset {pos - 2} (at most 8)")
                if n > end - pos:
                    break
                stack.append(int.from_bytes(data[pos : pos + n], "little", signed=True))
                pos += n
            elif op == 0x72:  # LONG_BINPUT
                if pos + 4 > end:
                    break
                self._put(_U32.unpack_from(data, pos)[0], pos)
                pos += 4
            elif op == 0x6A:  # LONG_BINGET
                if pos + 4 > end:
                    break
                stack.append(self._get(_U32.unpack_from(data, pos)[0], pos))
                pos += 4
            elif op == 0x47:  # BINFLOAT
                if pos + 8 > end:
                    break
                stack.append(_F64.unpack_from(data, pos)[0])
                pos += 8
            elif op == 0x85:  # TUPLE1
                if len(stack) - (marks[-1] if marks else 0) < 1:
                    raise Refused(f"TUPLE1 without an item at offset {pos - 1}")
                stack.append(self._tuple((stack.pop(),), pos - 1))
            elif op == 0x87:  # TUPLE3
                if len(stack) - (marks[-1] if marks else 0) < 3:
                    raise Refused(f"TUPLE3 with fewer than three items at offset {pos - 1}")
                c = stack.pop()
                b = stack.pop()
                a = stack.pop()
                stack.append(self._tuple((a, b, c), pos - 1))
            elif op == 0x74:  # TUPLE
                if not marks:
                    raise Refused(f"TUPLE without a mark at offset {pos - 1}")
                at = marks.pop()
                items = tuple(stack[at:])
                del stack[at:]
                stack.append(self._tuple(items, pos - 1))
            elif op == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif op == 0x61:  # APPEND
                if len(stack) - (marks[-1] if marks else 0) < 2:
                    raise Refused(f"APPEND with nothing to append to at offset {pos - 1}")
                item = stack.pop()
                target = stack[-1]
                if type(target) is not list or id(target) in frozen:
                    raise Refused(f"APPEND to a {_kind(target, frozen)} at offset {pos - 1}")
                if type(item) in _CONTAINERS:
                    d = max(depth.get(id(target), 1), depth.get(id(item), 1) + 1)
                    if d > max_depth:
                        raise Refused(f"containers nest deeper than {max_depth} at offset {pos - 1}")
                    depth[id(target)] = d
                target.append(item)
            elif op == 0x73:  # SETITEM
                if len(stack) - (marks[-1] if marks else 0) < 3:
                    raise Refused(f"SETITEM with nothing to set in at offset {pos - 1}")
                value = stack.pop()
                key = stack.pop()
                target = stack[-1]
                if type(target) is not dict or id(target) in frozen:
                    raise Refused(f"SETITEM on a {_kind(target, frozen)} at offset {pos - 1}")
                self._setitems(target, [key, value], pos - 1)
            elif op == 0x8C:  # SHORT_BINUNICODE
                if pos >= end:
                    break
                n = data[pos]
                pos += 1
                if n > end - pos:
                    raise Refused(f"a string of {n} bytes at offset {pos - 2} runs past the end")
                stack.append(_text(data, pos, n))
                pos += n
            elif op == 0x8D:  # BINUNICODE8
                if pos + 8 > end:
                    break
                (n,) = _U64.unpack_from(data, pos)
                pos += 8
                if n > end - pos:
                    raise Refused(f"a string of {n} bytes at offset {pos - 9} runs past the end")
                if n >= LARGE_STRING and strings is not None:
                    stack.append(strings.text(data, pos, n))
                else:
                    stack.append(_text(data, pos, n))
                pos += n
            elif op == 0x94:  # MEMOIZE (Python's pickler, protocol 4 and later)
                self._put(len(memo), pos + 1)
            elif op == 0x95:  # FRAME (protocol 4 and later): a length to read ahead, nothing to build
                if pos + 8 > end:
                    break
                if _U64.unpack_from(data, pos)[0] > end - pos - 8:
                    raise Refused(f"a frame at offset {pos - 1} runs past the end")
                pos += 8
            elif op == 0x80:  # PROTO
                if pos >= end:
                    break
                if pos != 1 or data[pos] > 5:
                    raise Refused(f"PROTO {data[pos]} at offset {pos - 1} (at the start, 2 to 5)")
                pos += 1
            elif op == 0x2E:  # STOP
                if len(stack) != 1 or marks:
                    raise Refused(f"STOP at offset {pos - 1} with {len(stack)} values and {len(marks)} marks left")
                return pos
            else:
                raise Refused(f"{opcode_name(op)} at offset {pos - 1}: not plain data")
        if partial and pos == end:
            return pos
        raise Refused(f"the stream ends at offset {end} before its STOP")

    def _get(self, index: int, pos: int) -> object:
        try:
            value = self.memo[index]
        except KeyError:
            if self.tail:
                return Unknown(index)
            raise Refused(f"a memo reference to {index}, never stored, at offset {pos - 1}") from None
        if type(value) in _MUTABLE:
            # A container fetched from the memo is never added to again: a pickle of plain data refers back only to
            # what it finished, so nothing can come to contain itself.
            self.frozen.add(id(value))
        return value

    def _put(self, index: int, pos: int) -> None:
        if not self.stack or len(self.stack) == (self.marks[-1] if self.marks else 0):
            raise Refused(f"a memo store with nothing to store at offset {pos - 1}")
        if index not in self.memo and len(self.memo) >= self.max_memo:
            raise Refused(f"more than {self.max_memo} memo entries at offset {pos - 1}")
        self.memo[index] = self.stack[-1]

    def _tuple(self, items: tuple, pos: int) -> tuple:
        d = 1
        for item in items:
            if type(item) in _CONTAINERS:
                d = max(d, self.depth.get(id(item), 1) + 1)
        if d > self.max_depth:
            raise Refused(f"containers nest deeper than {self.max_depth} at offset {pos}")
        self.depth[id(items)] = d
        return items

    def _setitems(self, target: dict, items: list, pos: int) -> None:
        depth = self.depth
        d = depth.get(id(target), 1)
        for k in range(0, len(items), 2):
            key = items[k]
            if type(key) not in _KEYS:
                raise Refused(f"a dict key of type {_kind(key, self.frozen)} at offset {pos}")
            value = items[k + 1]
            if type(value) in _CONTAINERS:
                d = max(d, depth.get(id(value), 1) + 1)
            target[key] = value
        if d > self.max_depth:
            raise Refused(f"containers nest deeper than {self.max_depth} at offset {pos}")
        depth[id(target)] = d


_CONTAINERS = frozenset({list, dict, tuple})
_MISSING = object()
_MUTABLE = frozenset({list, dict})
_KEYS = frozenset({str, int, bool, float, type(None)})


def _kind(value: object, frozen: set[int]) -> str:
    if type(value) in _MUTABLE and id(value) in frozen:
        return f"finished {type(value).__name__}"
    if isinstance(value, Unknown):
        return "value not read"
    return type(value).__name__


def _text(data: bytes, pos: int, n: int) -> str:
    # The C++ pickler writes std::string bytes as they are; a name that is not UTF-8 stays readable, marked.
    return data[pos : pos + n].decode("utf-8", "backslashreplace")


def loads(data: bytes, *, max_depth: int = MAX_DEPTH, max_memo: int = MAX_MEMO) -> object:
    """The value of a whole protocol-2 stream of plain data, or Refused."""
    reader = Reader(data, max_depth=max_depth, max_memo=max_memo)
    end = reader.run(0)
    if end != len(data):
        raise Refused(f"{len(data) - end} bytes after the STOP at offset {end - 1}")
    return reader.stack[0]
