"""The dump reader: every format version read from real PyTorch dumps, hostile files refused with a note, nothing
run, nothing opened that is not a regular file, no exception past the reader on mutated dumps."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.telemetry.flight_recorder.dumps import RanksCache, Unreadable, read_json, read_pickle, read_tail
from providers.telemetry.flight_recorder.source import read_file
from providers.telemetry.flight_recorder.unpickle import MAX_DEPTH, Refused, loads
from tests.telemetry.flight_recorder.support import FIXTURES, conclude_folder, dump_210, entry, pickled, tree

PICKLES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name[-1].isdigit())
JSONS = sorted(FIXTURES.rglob("*.json"))


@pytest.mark.parametrize(
    ("folder", "version"),
    [
        ("v1.4", "1.4"),
        ("v2.1", "2.1"),
        ("v2.4", "2.4"),
        ("v2.4-json", "2.4"),
        ("v2.9", "2.9"),
        ("v2.10", "2.10"),
        ("v2.9-json", "2.9"),
        ("v2.10-json", "2.10"),
    ],
)
def test_every_version_is_read(folder: str, version: str) -> None:
    files = [p for p in (FIXTURES / folder).rglob("*") if p.is_file() and not p.name.endswith(".md")]
    assert files
    entries = 0
    for path in files:
        rank = int(path.name.removesuffix(".json").rsplit("_", 1)[1])
        dump = read_file(str(path), rank, path.suffix == ".json", RanksCache())
        assert dump.version == version and dump.whole
        assert all(e.state in ("scheduled", "started", "completed") for e in dump.entries)
        entries += len(dump.entries)
    assert entries  # (a dump holding only unfinished entries of a rank that waits in nothing holds none)


def test_json_and_pickle_of_one_rank_agree() -> None:
    for version in ("v2.9", "v2.10"):
        for path in (FIXTURES / f"{version}-json" / "not_reached").rglob("*.json"):
            rank = int(path.name.removesuffix(".json").rsplit("_", 1)[1])
            j = read_file(str(path), rank, True, RanksCache())
            p = read_file(
                str(FIXTURES / version / "not_reached" / path.parent.name / path.stem), rank, False, RanksCache()
            )
            assert [(e.group, e.seq, e.op, e.done) for e in j.entries] == [
                (e.group, e.seq, e.op, e.done) for e in p.entries
            ]


def test_a_class_lookup_that_would_run_a_command_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = f"touch {marker}".encode()
    hostile = b"\x80\x02cos\nsystem\nX" + len(command).to_bytes(4, "little") + command + b"\x85R."
    path = tmp_path / "job" / "0" / "node-a" / "nccl_trace_rank_0"
    path.parent.mkdir(parents=True)
    path.write_bytes(hostile)
    with pytest.raises(Unreadable, match="GLOBAL at offset 2"):
        read_file(str(path), 0, False, RanksCache())
    result = conclude_folder(tmp_path / "job" / "0")
    assert not marker.exists()
    assert not result.node_items
    assert any("node-a/nccl_trace_rank_0" in n and "GLOBAL" in n for n in result.notes)


@pytest.mark.parametrize(
    "stream",
    [
        b"\x80\x02c__builtin__\neval\n.",
        b"\x80\x02\x8c\x02os\x8c\x06system\x93.",
        b"\x80\x02}(K\x01K\x02ub.",
        b"\x80\x02X\x01\x00\x00\x00xQ.",
        b"\x80\x02N\x82\x01.",
        b"\x80\x02]K\x01\x81.",
        b"\x80\x02(K\x01i.",
        b"\x80\x02(K\x01o.",
        b"\x80\x02U\x01x.",
    ],
)
def test_every_opcode_beyond_plain_data_is_refused(stream: bytes) -> None:
    with pytest.raises(Refused):
        loads(stream)


def test_a_truncated_stream_is_refused() -> None:
    data = (next(iter(p for p in PICKLES if "v2.10" in str(p)))).read_bytes()
    for cut in (1, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(Refused):
            loads(data[:cut])


def test_a_200_mb_file_is_refused_by_its_size_without_being_read(tmp_path: Path) -> None:
    path = tmp_path / "nccl_trace_rank_3"
    with open(path, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: no disk is used
    with pytest.raises(Unreadable, match="more than"):
        read_file(str(path), 3, False, RanksCache())


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(Refused, match="nest deeper"):
        loads(b"\x80\x02" + b"K\x00" + b"\x85" * (MAX_DEPTH + 5) + b".")
    with pytest.raises(Refused, match="nest deeper"):
        loads(b"\x80\x02" + b"](" * (MAX_DEPTH + 5) + b"e" * (MAX_DEPTH + 5) + b".")
    with pytest.raises(Unreadable, match="nests deeper"):
        read_json(b"[" * 100 + b"]" * 100, 0, RanksCache())


def test_a_container_cannot_come_to_hold_itself() -> None:
    with pytest.raises(Refused):
        loads(b"\x80\x02]q\x00(h\x00e.")


@pytest.mark.parametrize(
    "text",
    [
        b'{"version": 2.1}',
        b'{"version": "2.10", "entries": {}}',
        b'{"version": "2.10", "entries": [1]}',
        b'{"version": "2.10", "entries": [{"profiling_name": "nccl:all_reduce", "state": "done", "retired": false}]}',
        b'{"version": "2.10", "pg_config": [], "entries": []}',
        b"not json",
        b"[]",
    ],
)
def test_wrong_types_in_json_are_a_note(text: bytes) -> None:
    with pytest.raises(Unreadable):
        read_json(text, 0, RanksCache())


def test_a_fifo_in_a_dump_folder_is_never_opened(tmp_path: Path) -> None:
    folder = tree(tmp_path, "v2.10/not_reached")
    os.mkfifo(folder / "node-0" / "nccl_trace_rank_7")
    done = threading.Event()
    result: list[object] = []

    def run() -> None:
        result.append(conclude_folder(folder))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "reading the folder blocked on the FIFO"
    notes = result[0].notes  # type: ignore[attr-defined]
    assert any("node-0/nccl_trace_rank_7 is not a regular file and was not opened" in n for n in notes)


def test_a_large_dump_is_read_from_its_end_as_from_its_start() -> None:
    entries = [entry("0", s, record=s) for s in range(1, 3001)]
    entries[-1] = entry("0", 3000, state="scheduled", record=3000)
    data = pickled(dump_210(entries))
    head = data[: 256 * 1024]
    tail = data[-64 * 1024 :]
    part = read_tail(head, tail, 0, RanksCache())
    whole = read_pickle(data, 0, RanksCache())
    assert part is not None and not part.whole and 0 < len(part.entries) < 3000
    assert part.entries == whole.entries[-len(part.entries) :]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(PICKLES) - 1),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.integers(0, 1 << 20),
)
def test_mutated_dumps_never_raise_past_the_reader(which: int, edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(PICKLES[which].read_bytes())
    for at, value in edits:
        data[at % len(data)] = value
    data = bytes(data[: max(1, cut % (len(data) + 1))])
    try:
        read_pickle(data, 0, RanksCache())
    except Unreadable:
        pass


def test_a_dump_of_more_entries_than_the_bound_uses_its_newest(monkeypatch: pytest.MonkeyPatch) -> None:
    from providers.telemetry.flight_recorder import dumps

    monkeypatch.setattr(dumps, "MAX_ENTRIES", 10)
    data = pickled(dump_210([entry("0", s, record=s) for s in range(1, 31)]))
    dump = read_pickle(data, 0, RanksCache())
    assert [e.seq for e in dump.entries] == list(range(21, 31)) and not dump.whole
    assert dump.notes == ["rank 0's dump holds 30 entries: only its newest 10 were used"]


def test_a_name_first_stored_after_the_head_entries_is_read_from_further_back() -> None:
    # the operation of the newest entries appears first at entry 40: the first tail read meets a memo reference into
    # the part it skipped and reads more of the first entries
    entries = [entry("0", s, record=s, op="nccl:all_reduce" if s < 40 else "nccl:broadcast") for s in range(1, 3001)]
    data = pickled(dump_210(entries))
    part = read_tail(data[: 256 * 1024], data[-64 * 1024 :], 0, RanksCache())
    assert part is not None and part.entries[-1].op == "nccl:broadcast"
    assert part.entries == read_pickle(data, 0, RanksCache()).entries[-len(part.entries) :]


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_dumps_pickled_again_by_python_are_read_alike(protocol: int) -> None:
    # a dump loaded and written again with Python's own pickler (as a tool that edits dumps would): containers are
    # memoized when made, protocol 4 and later add frames and short strings
    for path in PICKLES:
        value = loads(path.read_bytes())
        assert loads(pickle.dumps(value, protocol=protocol)) == value


def test_a_container_referred_to_before_it_is_finished_is_refused() -> None:
    # a list that would hold itself, the way Python writes one: memoized when made, fetched, then appended to
    with pytest.raises(Refused, match="APPEND to a finished list"):
        loads(b"\x80\x02]q\x00h\x00a.")
    with pytest.raises(Refused, match="SETITEMS on a finished dict"):
        loads(b"\x80\x02}q\x00(K\x01h\x00u.")


def test_fields_the_analysis_does_without_may_be_absent_but_not_of_another_type() -> None:
    lean = entry("0", 3)
    for key in ("retired", "is_p2p", "p2p_seq_id", "time_created_ns", "input_dtypes", "thread_id"):
        del lean[key]
    dump = read_pickle(pickled(dump_210([lean])), 0, RanksCache())
    assert [(e.seq, e.retired, e.p2p) for e in dump.entries] == [(3, False, False)]
    for key, value in (("retired", 1), ("is_p2p", "no"), ("collective_seq_id", "3"), ("p2p_seq_id", 1.5)):
        with pytest.raises(Unreadable):
            read_pickle(pickled(dump_210([{**entry("0", 3), key: value}])), 0, RanksCache())
