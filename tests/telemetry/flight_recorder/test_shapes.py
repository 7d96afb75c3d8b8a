"""Entries built by their shape (shapes.py) against the reader's opcode-by-opcode result: the same values, and no
shape used where the memo does not hold what it fetches or made where an entry reaches below itself."""

from __future__ import annotations

import pickle

from providers.telemetry.flight_recorder.dumps import tail_pattern
from providers.telemetry.flight_recorder.shapes import derive, match, store
from providers.telemetry.flight_recorder.unpickle import Reader, Unknown, loads
from tests.telemetry.flight_recorder.test_reader import _large, _OtherWidths


def _entries(data: bytes) -> tuple[list[int], Reader]:
    """Where each entry starts (the last ends where the list does), and a reader after the whole dump."""
    found = tail_pattern(data)
    assert found is not None
    first, pattern = found
    starts = [first]
    at = data.find(pattern, first + 1)
    while at != -1:
        starts.append(at)
        at = data.find(pattern, at + len(pattern))
    reader = Reader(data)
    reader.run(0)
    return starts, reader


def _data() -> bytes:
    dump = _large(entries=120)
    for i, row in enumerate(dump["entries"]):  # type: ignore[arg-type]
        row["time_created_ns"] = 2**33 + i * 2**20 if i % 2 else -(2**40) - i
        row["duration_ms"] = i / 7 if i % 3 else float("inf")
        row["frames"] = (i, None, -i)
    return _OtherWidths().dumps(dump)


def test_an_entry_built_by_its_shape_is_the_one_the_reader_builds() -> None:
    data = _data()
    starts, reader = _entries(data)
    whole = loads(data)["entries"]  # type: ignore[index]
    built = 0
    for k in range(len(starts) - 1):
        shape = derive(data, starts[k], starts[k + 1])
        assert shape is not None
        for j in range(len(starts) - 1):
            entry = match(shape, data, starts[j], reader)
            if entry is not None:
                assert repr(entry) == repr(whole[j])
                built += 1
    assert built > 2 * len(starts)  # entries of one shape build each other's


def test_a_shape_is_not_used_when_the_memo_does_not_hold_what_it_fetches() -> None:
    data = _data()
    starts, reader = _entries(data)
    shape = derive(data, starts[1], starts[2])
    assert shape is not None and match(shape, data, starts[1], reader) is not None
    key = shape.refs[0]
    kept = reader.memo[key]
    for value in ([], {}, Unknown(key)):
        reader.memo[key] = value
        assert match(shape, data, starts[1], reader) is None
    del reader.memo[key]
    assert match(shape, data, starts[1], reader) is None
    reader.memo[key] = kept
    reader.max_depth = shape.depth - 1
    assert match(shape, data, starts[1], reader) is None


def test_no_shape_is_made_of_bytes_that_reach_below_the_entry_or_memoize_containers() -> None:
    # a tuple of what lies below (TUPLE with the list's mark), an item set in a dict it did not make, and an entry as
    # Python's pickler writes it (the dict memoized as it is made)
    for raw in (b"K\x01K\x02t", b"K\x01K\x02s", b"}(K\x01K\x02u}"):
        assert derive(raw, 0, len(raw)) is None
    python = pickle.dumps({"record_id": 1, "state": "completed"}, protocol=2)[2:-1]
    assert derive(python, 0, len(python)) is None


def test_an_entry_of_every_opcode_a_shape_covers_is_built_alike() -> None:
    # keys stored with BINPUT and LONG_BINPUT; values: LONG1 of no, three and eight bytes, BINFLOAT, SHORT_BINUNICODE,
    # EMPTY_TUPLE, TUPLE1, TUPLE2 and TUPLE, LONG_BINGET, lists by APPEND, dicts by SETITEM
    first = (
        b"}(X\x01\x00\x00\x00ar\x00\x01\x00\x00\x8a\x00"
        b"\x8c\x01bq\x05\x8a\x03\x01\x02\xff"
        b"X\x01\x00\x00\x00cq\x06\x8a\x08\x01\x00\x00\x00\x00\x00\x00\x80"
        b"X\x01\x00\x00\x00dq\x07G\xc0\t!\xfbTD-\x18"
        b"X\x01\x00\x00\x00eq\x08)\x8c\x01xq\x09\x85\x86"
        b"X\x01\x00\x00\x00gq\x0b(K\x01K\x02t"
        b"X\x01\x00\x00\x00hq\x0cj\x09\x00\x00\x00"
        b"X\x01\x00\x00\x00fq\x0a]K\x07aJ\xff\xff\xff\xffa}h\x09Nsa}\x88\x89sa"
        b"u"
    )
    again = (
        first.replace(b"\x8a\x03\x01\x02\xff", b"\x8a\x03\x05\x06\x07")
        .replace(b"K\x07", b"K\x09")
        .replace(b"G\xc0\t!\xfbTD-\x18", b"G\x40\x00\x00\x00\x00\x00\x00\x00")
    )
    strict = Reader(first + again)
    strict.end = len(first)
    strict.run(0, partial=True)
    shape = derive(first, 0, len(first))
    assert shape is not None
    strict.end = len(first) + len(again)
    strict.run(len(first), partial=True)
    entry = match(shape, first + again, len(first), strict)
    assert entry is not None and repr(entry) == repr(strict.stack[-1])
    assert entry == {
        "a": 0,
        "b": int.from_bytes(b"\x05\x06\x07", "little", signed=True),
        "c": -(2**63) + 1,
        "d": 2.0,
        "e": ((), ("x",)),
        "g": (1, 2),
        "h": "x",
        "f": [9, -1, {"x": None}, {True: False}],
    }


def test_an_entry_whose_dict_is_not_kept_stores_what_the_reader_stores() -> None:
    # a value fetched from the memo (slot 7, stored before the entry) and stored again (slot 1), then used as a key
    raw = b"}(h\x07q\x01K\x05u"
    strict = Reader(raw)
    strict.memo[7] = "zz"
    strict.run(0, partial=True)
    shape = derive(raw, 0, len(raw))
    assert shape is not None
    reader = Reader(raw)
    reader.memo[7] = "yy"
    assert store(shape, raw, 0, reader)
    assert reader.memo == {7: "yy", 1: "yy"}
    assert strict.memo == {7: "zz", 1: "zz"} and strict.stack == [{"zz": 5}]
    for value in ([], {}, Unknown(7)):
        reader = Reader(raw)
        reader.memo[7] = value
        assert not store(shape, raw, 0, reader) and 1 not in reader.memo
    reader = Reader(raw, max_memo=1)
    reader.memo[7] = "yy"
    assert not store(shape, raw, 0, reader) and 1 not in reader.memo
