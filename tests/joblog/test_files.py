"""The job-log reader: layout, rotation, tails bounded per node and per request, path safety, broken files."""

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError
from providers.telemetry.joblog import files, wire
from providers.telemetry.joblog.files import JobLogRead, ReadLimits, parse_file_name, read_job_logs
from providers.telemetry.joblog.nodes import exact_resolver, is_safe_component
from providers.telemetry.joblog.patterns import MAX_LINE_CHARS
from providers.telemetry.joblog.prefilter import text_lines
from tests.joblog import fixtures as fx
from tests.joblog.support import deadline, write_tree

LOGGER = "attribution_adapter.telemetry.joblog"


def _read(
    root: Path, nodes: list[str], workload: str = "job-1", attempt: int = 0, limits: ReadLimits | None = None,
    on_line: Callable[[str, str], None] | None = None, until: Deadline | None = None, settles: bool = True,
) -> tuple[JobLogRead, dict[str, list[str]]]:
    """Read with sinks that keep each node's lines and say the tail settles the node (or, with `settles` false,
    never)."""
    got: dict[str, list[str]] = {}

    def sink_for(node: str) -> Callable[[list[bytes]], bool]:
        def sink(pieces: list[bytes]) -> bool:
            got[node] = []
            for line in (line for data in pieces for line in text_lines(data)):
                got[node].append(line)
                if on_line:
                    on_line(node, line)
            return settles

        return sink

    read = read_job_logs(root, workload, attempt, nodes, exact_resolver(nodes), sink_for, until or deadline(), limits)
    return read, got


def test_layout_rotation_newest_first_and_lines_oldest_first(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "worker-01.log": ["[rank0]: newest"],
        "worker-01.log.1": ["[rank0]: older"],
        "worker-01.log.2.gz": ["[rank0]: oldest"],
        "worker-02.log": list(fx.LLAMAFACTORY_6269),
    })
    read, got = _read(tmp_path, ["worker-01", "worker-02", "worker-03"])
    assert read.found and read.without_files == ("worker-03",)
    w1 = read.nodes["worker-01"]
    assert w1.files == ("job-1/0/worker-01.log", "job-1/0/worker-01.log.1", "job-1/0/worker-01.log.2.gz")
    assert not w1.cut and w1.skipped == ()
    assert got["worker-01"] == ["[rank0]: oldest", "[rank0]: older", "[rank0]: newest"]
    assert got["worker-02"] == list(fx.LLAMAFACTORY_6269)
    assert read.bytes_read == sum(r.bytes_read for r in read.nodes.values()) > 0


def test_a_node_matches_only_its_whole_name_ignoring_case(tmp_path: Path) -> None:
    write_tree(tmp_path, {"worker-01.log": ["a"], "WORKER-02.log": ["b"], "worker.log.bak": ["c"]})
    read, got = _read(tmp_path, ["worker", "worker-02"])
    assert set(read.nodes) == {"worker-02"} and got == {"worker-02": ["b"]}
    assert read.without_files == ("worker",)


def test_only_the_tail_is_read_and_a_cut_file_says_so(tmp_path: Path) -> None:
    lines = [f"[rank0]: step {i:06d} loss 1.0" for i in range(20_000)] + list(fx.LLAMAFACTORY_7396)
    write_tree(tmp_path, {"node-a.log": lines, "node-a.log.1": ["[rank0]: never read"]})
    read, got = _read(tmp_path, ["node-a"], limits=ReadLimits(node_bytes=4096))
    node = read.nodes["node-a"]
    assert node.cut and node.bytes_read == 4096 and node.files == ("job-1/0/node-a.log",)
    assert got["node-a"][-4:] == list(fx.LLAMAFACTORY_7396)  # the failure at the end is there
    assert all(line in lines for line in got["node-a"])  # the line cut by the tail's start was dropped, not shown
    assert "older output of 1 node(s) lies beyond the read bound and was not read" in read.notes


def test_the_request_bound_is_shared_and_a_small_node_leaves_its_rest_to_the_others(tmp_path: Path) -> None:
    big = ["x" * 99] * 400  # 40,000 bytes each
    write_tree(tmp_path, {"a.log": big, "b.log": big, "c.log": ["small"]})
    read, _ = _read(tmp_path, ["a", "b", "c"], limits=ReadLimits(node_bytes=40_000, request_bytes=30_006),
                    settles=False)
    assert read.nodes["c"].bytes_read == 6 and not read.nodes["c"].cut
    # An eighth of the bound is kept back for reading further back a node whose share does not settle it: a's
    # share did not, so it took the reserve; b found it spent.
    reserve = 30_006 // 8
    share = (30_006 - reserve - 6) // 2
    assert read.nodes["b"].bytes_read == share and not read.nodes["b"].further
    assert read.nodes["a"].bytes_read == share + reserve and read.nodes["a"].further
    assert read.nodes["a"].cut and read.nodes["a"].undecided and read.nodes["b"].undecided
    assert read.bytes_read == 30_006
    assert read.notes[-1] == (
        "within the read bound of the job logs of 2 node(s), some rank that wrote there has no watchdog, progress or "
        "error line, and older output was not read: a, b"
    )


def test_an_empty_file_is_read_whole_and_not_cut_but_an_empty_current_file_before_a_rotated_one_is_read_on(
    tmp_path: Path,
) -> None:
    write_tree(tmp_path, {"a.log": [], "b.log": [], "b.log.1": ["older"]})
    read, got = _read(tmp_path, ["a", "b"])
    assert not read.nodes["a"].cut and got["a"] == [] and read.notes == ()
    assert not read.nodes["b"].cut and got["b"] == ["older"]


def test_a_gz_file_too_large_to_reach_its_end_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_GZ_INFLATED_BYTES", 1000)
    write_tree(tmp_path, {"a.log": ["current"], "a.log.1.gz": ["old line"] * 1000})
    read, got = _read(tmp_path, ["a"])
    assert got["a"] == ["current"] and read.nodes["a"].cut


def test_unsafe_workload_ids_read_nothing_and_say_so(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.log": ["secret"]}, workload="job-1")
    (tmp_path / "0").mkdir()
    for workload in ("..", ".", "../job-1", "job-1/../job-1", "", "a\\b", "job\x01"):
        read, got = _read(tmp_path / "job-1", ["a"], workload=workload)
        assert not read.found and got == {}
        assert read.notes == ("the workload id cannot name a job-log folder: no job logs were looked for",)


def test_unsafe_node_names_are_refused_and_said(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.log": ["ok"]})
    read, got = _read(tmp_path, ["a", "../a", "x/a", ".."])
    assert read.refused == ("../a", "x/a", "..") and set(got) == {"a"}
    assert read.notes[0] == "3 scope node name(s) cannot name a job-log file and were not looked for"
    assert not is_safe_component("a" * 256) and is_safe_component("worker-01.cluster.local")
    # every control character (C0 and DEL) and both separators, anywhere in the name; nothing else up to U+010F
    refused = [c for c in map(chr, range(0x110)) if not is_safe_component(f"a{c}b") or not is_safe_component(c + "a")]
    assert refused == [*map(chr, range(0x20)), "/", "\\", "\x7f"]


def test_a_corrupt_file_is_skipped_with_a_warning_that_names_it_and_quotes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = write_tree(tmp_path, {"a.log": ["current line"], "b.log": ["b line"]})
    (folder / "a.log.1.gz").write_bytes(b"SECRET-CONTENT not gzip at all")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        read, got = _read(tmp_path, ["a", "b"])
    assert got == {"a": ["current line"], "b": ["b line"]}
    assert read.nodes["a"].skipped == ("job-1/0/a.log.1.gz",)
    assert "1 job-log file(s) could not be read and were skipped" in read.notes
    (record,) = caplog.records
    assert record.getMessage() == "skipped job-log file job-1/0/a.log.1.gz: BadGzipFile"
    assert "SECRET" not in caplog.text and "line" not in caplog.text


def test_a_file_that_vanishes_while_the_request_runs_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = write_tree(tmp_path, {"a.log": ["a line"], "b.log": ["b line"], "c.log": ["c line"]})

    def remove_b(node: str, line: str) -> None:
        (folder / "b.log").unlink(missing_ok=True)

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        read, got = _read(tmp_path, ["a", "b", "c"], on_line=remove_b)
    assert got == {"a": ["a line"], "b": [], "c": ["c line"]}
    assert read.nodes["b"].skipped == ("job-1/0/b.log",) and read.nodes["b"].files == ()
    assert "job-1/0/b.log: FileNotFoundError" in caplog.text


def test_untidy_bytes_long_lines_and_no_final_newline(tmp_path: Path) -> None:
    line = fx.LLAMAFACTORY_6269[1].encode()
    data = b"\xff\xfe bad utf-8\r\n" + b"x" * (MAX_LINE_CHARS * 3) + b"\n" + line
    write_tree(tmp_path, {"a.log": data})
    _, got = _read(tmp_path, ["a"])
    assert got["a"][0] == "\ufffd\ufffd bad utf-8\r"  # decoded with replacement; the parser drops the CR
    assert len(got["a"][1]) == MAX_LINE_CHARS
    assert got["a"][2] == line.decode()


def test_missing_folders_are_no_job_logs(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.log": ["x"]}, attempt=0)
    for workload, attempt in (("job-1", 1), ("job-2", 0)):
        read, got = _read(tmp_path, ["a"], workload=workload, attempt=attempt)
        assert not read.found and got == {} and read.notes == ("no job-log folder for this workload attempt",)


def test_a_folder_that_cannot_be_listed_is_a_processing_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_tree(tmp_path, {"a.log": ["x"]})
    real = os.scandir

    def refuse(path: object) -> object:
        if Path(str(path)) == folder:
            raise PermissionError(13, "Permission denied")
        return real(path)  # type: ignore[call-overload]

    monkeypatch.setattr(files.os, "scandir", refuse)
    with pytest.raises(ProviderProcessingError, match="could not be read"):
        _read(tmp_path, ["a"])


def test_past_the_deadline_reading_stops_with_a_timeout(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.log": ["x"]})
    with pytest.raises(ProviderTimeoutError, match="did not finish in time"):
        _read(tmp_path, ["a"], until=Deadline(time.monotonic() - 1))


def test_a_deadline_passed_between_nodes_keeps_what_was_read_and_names_the_rest(tmp_path: Path) -> None:
    write_tree(tmp_path, {"a.log": ["x"], "b.log": ["y"], "c.log": ["z"]})
    until = Deadline(time.monotonic() + 0.05)

    def slow_line(node: str, line: str) -> None:
        time.sleep(0.1)  # reading node a outlasts the deadline; its lines were all read before the next check

    read, got = _read(tmp_path, ["a", "b", "c"], on_line=slow_line, until=until)
    assert set(read.nodes) == {"a"} and got["a"] == ["x"]
    assert read.late == ("b", "c")
    assert "the deadline came before the job logs of 2 of 3 node(s) with files were read: b, c" in read.notes


def test_limits_and_names() -> None:
    with pytest.raises(ValueError):
        ReadLimits(node_bytes=0)
    with pytest.raises(ValueError):
        ReadLimits(request_bytes=files.MAX_REQUEST_BYTES + 1)
    assert parse_file_name("worker-01.log") == ("worker-01", 0, False)
    assert parse_file_name("worker-01.log.3.gz") == ("worker-01", 3, True)
    assert parse_file_name("node.example.com.log.12") == ("node.example.com", 12, False)
    assert parse_file_name("worker-01.log-20260901") is None and parse_file_name(".log") is None
    assert parse_file_name("worker.txt") is None and parse_file_name("worker.log.²") is None


def _planned(root: Path, nodes: list[str]) -> files.JobLogPlan:
    return files.plan_job_logs(root, "job-1", 0, nodes, exact_resolver(nodes), deadline())


def test_a_plan_read_in_parts_in_any_order_is_the_read_in_scope_order(tmp_path: Path) -> None:
    nodes = [f"worker-{n:02d}" for n in range(12)]
    write_tree(tmp_path, {
        **{f"{node}.log": [f"[rank{n}]: line {i}" for i in range(n * 3)] for n, node in enumerate(nodes) if n != 4},
        "worker-02.log.1": ["[rank2]: older"], "worker-03.log.1.gz": ["[rank3]: oldest"],
    })  # fmt: skip
    want, want_lines = _read(tmp_path, nodes)
    plan = _planned(tmp_path, nodes)
    assert plan.order == tuple(n for n in nodes if n != "worker-04")
    got_lines: dict[str, list[str]] = {}

    def sink_for(node: str) -> Callable[[list[bytes]], bool]:
        def sink(pieces: list[bytes]) -> bool:
            got_lines[node] = [line for data in pieces for line in text_lines(data)]
            return True

        return sink

    reads: dict[str, files.NodeRead] = {}
    late: list[str] = []
    for part in (range(8, 11), range(0, 3), range(3, 8)):
        files.read_planned(plan, part, sink_for, deadline(), reads, late)
    assert plan.outcome(reads, late) == want
    assert got_lines == want_lines


def test_a_plan_sent_to_another_reader_comes_back_the_same(tmp_path: Path) -> None:
    nodes = ["worker-01", "worker-02", "worker-03"]
    write_tree(tmp_path, {"worker-01.log": ["a"], "worker-01.log.1": ["b"], "worker-01.log.2.gz": ["c"],
                          "worker-03.log": ["d"]})  # fmt: skip
    plan = _planned(tmp_path, nodes)
    value = json.loads(json.dumps(wire.plan_to_wire(plan)))
    back = wire.plan_from_wire(tmp_path, value, nodes, plan.budget, plan.reserve)
    assert (back.order, back.groups, back.shares, back.node_bytes, back.folder) == (
        plan.order, plan.groups, plan.shares, plan.node_bytes, plan.folder
    )


@pytest.mark.parametrize("change", [
    lambda v: v.update(folder="job-1"),
    lambda v: v.update(folder="../0"),
    lambda v: v.update(folder="job-1/x"),
    lambda v: v.update(folder="job-1/0/deeper"),
    lambda v: v.update(node_bytes=0),
    lambda v: v.update(node_bytes=files.MAX_NODE_BYTES + 1),
    lambda v: v.update(node_bytes="1"),
    lambda v: v["nodes"][0].__setitem__(0, "worker-99"),  # not of the scope
    lambda v: v["nodes"].append(list(v["nodes"][0])),  # a node twice
    lambda v: v["nodes"][0].__setitem__(1, -1),
    lambda v: v["nodes"][0].__setitem__(1, True),
    lambda v: v["nodes"][0].__setitem__(2, []),
    lambda v: v["nodes"][0].__setitem__(2, ["../../etc/passwd.log"]),
    lambda v: v["nodes"][0].__setitem__(2, ["worker-01.txt"]),
    lambda v: v["nodes"][0].__setitem__(2, "worker-01.log"),
    lambda v: v["nodes"][0].pop(),
    lambda v: v.pop("folder"),
    lambda v: v.update(nodes={"worker-01": 1}),
])  # fmt: skip
def test_a_plan_that_is_not_what_plan_to_wire_gives_is_refused(tmp_path: Path, change) -> None:
    nodes = ["worker-01", "worker-02"]
    write_tree(tmp_path, {"worker-01.log": ["a"], "worker-02.log": ["b"]})
    plan = _planned(tmp_path, nodes)
    value = wire.plan_to_wire(plan)
    change(value)
    with pytest.raises(ValueError):
        wire.plan_from_wire(tmp_path, value, nodes, plan.budget, plan.reserve)


class _AllBytes:
    """A byte bound that grants every request."""

    left = 1 << 40

    def take(self, n: int) -> int:
        return n


def test_a_plain_tail_is_read_across_chunks_and_stops_where_a_shrinking_file_ends(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "n.log"
    text = b"".join(b"line %07d\n" % i for i in range(300_000))  # over 3 MiB: several READ_CHUNK reads
    path.write_bytes(text)
    data, partial, used = files._plain_tail(str(path), 2_500_000, _AllBytes())
    assert (data, partial, used) == (text[-2_500_000:], True, 2_500_000)
    assert files._plain_tail(str(path), len(text) + 5, _AllBytes()) == (text, False, len(text))
    # the file was cut after its size was read: what is there is read, nothing past it
    real = os.fstat
    monkeypatch.setattr(files.os, "fstat", lambda fd: os.stat_result((*real(fd)[:6], len(text) + 4096, *real(fd)[7:])))
    data, partial, used = files._plain_tail(str(path), 10_000, _AllBytes())
    assert (data, partial, used) == (text[-(10_000 - 4096) :], True, 10_000 - 4096)
