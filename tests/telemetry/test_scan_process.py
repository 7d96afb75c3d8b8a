"""The kernel-log scan process (providers/telemetry/scan_process.py), forked from this test process with scans of
the tests' own: what it answers, what it refuses, and that it never keeps a worker waiting past the deadline.

The whole path through real gunicorn workers is pinned in tests/process/test_scan_process.py.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from providers.base import Deadline, ProviderTimeoutError
from providers.telemetry import scan_process
from providers.telemetry.identity import NodeNames
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.parse import Record
from providers.telemetry.kernel.sources.facts import Proof
from providers.telemetry.scan_process import ScanProcess
from providers.telemetry.window import Window
from tests.gunicorn_process import running

NODES = NodeNames(["gpu-01", "gpu-02.cluster.local", "gpu-03"])
T0 = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
WINDOW = Window(T0 - timedelta(minutes=15), T0 + timedelta(minutes=2))
BERLIN = ZoneInfo("Europe/Berlin")


def _filled(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None = None) -> Collector:
    """A finished collector holding every kind of thing a source puts in one."""
    collector = Collector(nodes, window, zone=BERLIN)
    collector.lines_in_window = {"gpu-01": 12, "gpu-02.cluster.local": 3}
    collector.seen_before = {"gpu-01", "gpu-03"}
    collector.seen_after = {"gpu-03"}
    at = window.end - timedelta(minutes=5)
    collector.records = {
        "gpu-01": [
            Record(at.astimezone(BERLIN), "kernel", ["NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>'", "more"],
                   ["raw line 1 \udcff", "raw line 2"], "679160.239013"),
            Record(at + timedelta(seconds=1), None, ["SXid (PCI:0000:05:00.0): 12028"], ["raw \u00e9"], None),
        ],
    }  # fmt: skip
    collector.unreadable_nodes = {"gpu-03"}
    collector.bytes_read = 123_456
    collector.truncated = True
    collector.unread = {"gpu-02.cluster.local"}
    return collector


def _fields(collector: Collector) -> dict:
    return {
        "lines_in_window": collector.lines_in_window, "seen_before": collector.seen_before,
        "seen_after": collector.seen_after, "records": collector.records,
        "unreadable_nodes": collector.unreadable_nodes,
        "unreadable_combined": collector.unreadable_combined, "bytes_read": collector.bytes_read,
        "truncated": collector.truncated, "unread": collector.unread, "nodes": collector.nodes,
    }  # fmt: skip


@pytest.fixture
def started(scan_processes):  # noqa: ANN001, ANN201
    """`start(scan, descriptors=())`: a scan process of this test process (tests/telemetry/conftest.py)."""
    return scan_processes


def _collect(process: ScanProcess, deadline: Deadline | None = None) -> Collector | None:
    with process.asked(NODES, WINDOW, deadline or Deadline.after_ms(10_000)) as pending:
        assert pending is not None
        return pending.collector(BERLIN)


def test_a_collector_sent_as_json_comes_back_the_same():
    sent = _filled(NODES, WINDOW, Deadline.after_ms(1000))
    back = Collector.from_wire(NODES, WINDOW, BERLIN, json.loads(json.dumps(sent.to_wire())))
    assert _fields(back) == _fields(sent)
    # the same instant, the offset it had (a zone's name becomes its offset at that instant)
    first = back.records["gpu-01"][0].observed_at
    assert first == sent.records["gpu-01"][0].observed_at and first.utcoffset() == timedelta(hours=2)
    assert back.with_telemetry() == sent.with_telemetry()


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"records": {"gpu-01": [["not a time", None, [], [], None]]}},
        {"records": {"gpu-01": [["2026-09-09T12:00:00+00:00", None]]}},
        {"lines_in_window": {"gpu-01": "many"}},
        {"unread": 7},
    ],
)
def test_a_collector_that_is_not_what_to_wire_made_is_refused(broken):
    wire = {**_filled(NODES, WINDOW, Deadline.after_ms(1000)).to_wire(), **broken} if broken else {}
    with pytest.raises((KeyError, TypeError, ValueError)):
        Collector.from_wire(NODES, WINDOW, BERLIN, wire)


def test_the_process_answers_with_the_collector_of_its_scan_for_the_nodes_window_and_deadline_asked(started):
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        collector = _filled(nodes, window, deadline)
        # what the process was asked comes back in the collector, checked here in the test process
        collector.lines_in_window["gpu-03"] = int(deadline.expires_at * 1000) % 1_000_000
        collector.seen_after.add(f"{window.start.isoformat()}|{','.join(nodes.nodes)}")
        return collector

    process = started(scan)
    deadline = Deadline.after_ms(10_000)
    for _ in range(3):  # one process serves request after request
        got = _collect(process, deadline)
        assert got is not None
        expected = scan(NODES, WINDOW, deadline, None)
        assert _fields(got) == _fields(expected)
    assert process.pid > 0


def test_what_the_process_listed_and_read_is_added_to_the_asker_s_proof(started, tmp_path):
    settled, fresh = tmp_path / "settled.log", tmp_path / "fresh.log"
    settled.write_text("a\n")
    os.utime(settled, ns=(0, 0))

    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        assert proof is not None and proof.items == [] and proof.sound
        for path in (settled, fresh) if deadline.remaining() > 5 else (settled,):
            proof.saw(str(path), os.stat(path))
        return Collector(nodes, window)

    process = started(scan)
    mine = Proof()
    mine.items.append(("worker-side", (1, 2, 3, 4, 5)))
    with process.asked(NODES, WINDOW, Deadline.after_ms(2_000), proof=True) as pending:
        assert pending is not None and pending.collector(UTC, mine) is not None
    st = os.stat(settled)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    assert mine.items == [("worker-side", (1, 2, 3, 4, 5)), (str(settled), identity)]
    # a file that changed less than CACHE_SETTLE_NS ago makes the process's proof, and so the asker's, unsound
    fresh.write_text("b\n")
    with process.asked(NODES, WINDOW, Deadline.after_ms(10_000), proof=True) as pending:
        assert pending is not None and pending.collector(UTC, mine) is not None
    assert [path for path, _ in mine.items][-2:] == [str(settled), str(fresh)]
    assert mine.sound is False


def test_a_scan_that_read_nothing_by_the_deadline_is_the_same_timeout_in_the_worker(started):
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        raise ProviderTimeoutError("reading the kernel logs did not finish in time")

    process = started(scan)
    with pytest.raises(ProviderTimeoutError, match="reading the kernel logs did not finish in time"):
        _collect(process)
    assert process.pid > 0, "a timeout is an answer: the process serves on"


def test_a_scan_that_failed_otherwise_is_left_to_the_worker_and_the_process_serves_on(started):
    calls = []

    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        if deadline.remaining() > 5:
            raise OSError("a failure the worker meets again when it scans itself")
        return Collector(nodes, window)

    process = started(scan)
    assert _collect(process, Deadline.after_ms(10_000)) is None
    assert process.pid > 0
    calls.append(_collect(process, Deadline.after_ms(2_000)))
    assert calls[0] is not None and calls[0].nodes == NODES.nodes


def test_what_a_scan_logs_is_written_in_the_asking_thread_bounded_and_at_its_own_time(started, caplog, monkeypatch):
    monkeypatch.setattr(scan_process, "MAX_LOG_RECORDS", 3)
    telemetry = "attribution_adapter.telemetry"

    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        files = logging.getLogger(f"{telemetry}.files")
        for n in range(5):
            files.warning("kernel log file %s could not be read", f"host-{n}/kern.log")
        time.sleep(0.2)
        return Collector(nodes, window)

    process = started(scan)
    with caplog.at_level("INFO"):
        t0 = time.time()
        assert _collect(process) is not None
    lines = [
        (r.name, r.levelname, r.getMessage()) for r in caplog.records
        if r.name.startswith(telemetry) and r.levelno >= logging.WARNING
    ]  # fmt: skip
    assert lines == [
        (f"{telemetry}.files", "WARNING", "kernel log file host-0/kern.log could not be read"),
        (f"{telemetry}.files", "WARNING", "kernel log file host-1/kern.log could not be read"),
        (f"{telemetry}.files", "WARNING", "kernel log file host-2/kern.log could not be read"),
        (telemetry, "WARNING", "2 more log line(s) of the kernel-log scan process were left out"),
    ]
    first = next(r for r in caplog.records if r.name == f"{telemetry}.files")
    assert t0 <= first.created < t0 + 0.15, "the line keeps the time it was written in the scan process"


def test_a_failed_scan_s_lines_are_left_to_the_worker_s_own_scan(started, caplog):
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        logging.getLogger("attribution_adapter.telemetry").warning("the worker's own scan says this again")
        raise OSError("failed")

    process = started(scan)
    with caplog.at_level("INFO"):
        assert _collect(process) is None
    assert not [r for r in caplog.records if "says this again" in r.getMessage()]


def test_a_second_ask_while_the_process_scans_is_left_to_the_worker(started):
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        time.sleep(0.3)
        return Collector(nodes, window)

    process = started(scan)
    deadline = Deadline.after_ms(10_000)
    with process.asked(NODES, WINDOW, deadline) as first:
        assert first is not None
        with process.asked(NODES, WINDOW, deadline) as second:
            assert second is None
        assert first.collector(UTC) is not None
    with process.asked(NODES, WINDOW, deadline) as third:
        assert third is not None and third.collector(UTC) is not None


def test_an_answer_given_up_on_is_skipped_by_the_next_ask(started):
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        collector = Collector(nodes, window)
        collector.bytes_read = int(round(deadline.remaining()))
        return collector

    process = started(scan)
    with process.asked(NODES, WINDOW, Deadline.after_ms(30_000)) as abandoned:
        assert abandoned is not None  # the caller failed before it took the answer
    got = _collect(process, Deadline.after_ms(9_000))
    assert got is not None and 7 <= got.bytes_read <= 9, "the answer to the later ask, not the earlier one"


def test_a_process_that_does_not_answer_by_the_deadline_is_killed_and_the_worker_scans(started, monkeypatch):
    monkeypatch.setattr(scan_process, "ANSWER_GRACE_S", 0.2)

    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: Proof | None) -> Collector:
        time.sleep(30)  # a scan that does not keep the deadline
        return Collector(nodes, window)

    process = started(scan)
    pid = process.pid
    t0 = time.monotonic()
    assert _collect(process, Deadline.after_ms(100)) is None
    assert time.monotonic() - t0 < 5
    assert process.pid == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped already
    with process.asked(NODES, WINDOW, Deadline.after_ms(1000)) as pending:
        assert pending is None, "no process any more: the worker scans from now on"


def test_a_process_killed_from_outside_is_found_gone_at_the_next_ask(started, caplog):
    process = started(lambda nodes, window, deadline, proof: Collector(nodes, window))
    pid = process.pid
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
        with process.asked(NODES, WINDOW, Deadline.after_ms(10_000)) as pending:
            # the ask cannot be written (the pipe's other end is closed), or its answer cannot be read
            assert pending is None or pending.collector(UTC) is None
        with process.asked(NODES, WINDOW, Deadline.after_ms(10_000)) as later:
            assert later is None
    assert process.pid == 0
    said = [r.getMessage() for r in caplog.records if "scan process" in r.getMessage() and "stopped" in r.getMessage()]
    assert len(said) == 1
    assert said[0].startswith(f"the kernel-log scan process {pid} is stopped (")
    assert said[0].endswith("): this worker scans the kernel logs")
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped


def test_the_process_closes_the_descriptors_it_is_given_and_ends_when_the_pipe_closes(started):
    read_end, write_end = os.pipe()
    try:
        process = started(lambda nodes, window, deadline, proof: Collector(nodes, window), [write_end])
        os.close(write_end)
        write_end = -1
        # the pipe's only other writer was the process: it closed its copy, so reading ends at once
        os.set_blocking(read_end, False)
        t0 = time.monotonic()
        while True:
            try:
                assert os.read(read_end, 1) == b""
                break
            except BlockingIOError:
                assert time.monotonic() - t0 < 5, "the process kept the descriptor open"
                time.sleep(0.01)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    pid = process.pid
    t0 = time.monotonic()
    process.close()
    assert time.monotonic() - t0 < scan_process.CLOSE_WAIT_S, "an idle process ends as soon as its pipe closes"
    assert process.pid == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert not running(pid)


def test_a_process_asked_from_a_process_forked_later_is_not_used_there(started):
    process = started(lambda nodes, window, deadline, proof: Collector(nodes, window))
    child = os.fork()
    if child == 0:  # a copy of the worker's object, in another process: it must not talk to the scan process
        code = 1
        try:
            with process.asked(NODES, WINDOW, Deadline.after_ms(1000)) as pending:
                code = 0 if pending is None and process.pid == 0 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _collect(process) is not None


def test_whether_the_tree_holds_a_file_of_many_hosts_is_kept_until_the_folder_changes(tmp_path):
    from providers.telemetry.kernel.sources.files import FileSource
    from providers.telemetry.provider import _combined

    source = FileSource(tmp_path)
    (tmp_path / "gpu-01").mkdir()
    (tmp_path / "gpu-02.log").write_text("x\n")
    os.utime(tmp_path, ns=(0, 1_000_000_000))  # settled: what is found is kept
    assert _combined(source) is False
    (tmp_path / "kern.log").write_text("x\n")  # a file of many hosts: the folder's time changes with it
    assert _combined(source) is True
    os.utime(tmp_path, ns=(0, 2_000_000_000))
    assert _combined(source) is True
    (tmp_path / "kern.log").unlink()
    assert _combined(source) is False
    os.utime(tmp_path, ns=(0, 3_000_000_000))
    assert _combined(source) is False
    # kept while the folder's time stays: what it found is not looked for again (shown by putting the time back)
    (tmp_path / "kern.log").write_text("x\n")
    os.utime(tmp_path, ns=(0, 3_000_000_000))
    assert _combined(source) is False
    (tmp_path / "kern.log").unlink()
    # a folder holding a symbolic link is listed every time
    (tmp_path / "gpu-03.log").symlink_to(tmp_path / "gpu-02.log")
    os.utime(tmp_path, ns=(0, 4_000_000_000))
    assert _combined(source) is False
    (tmp_path / "kern.log").write_text("x\n")
    os.utime(tmp_path, ns=(0, 4_000_000_000))
    assert _combined(source) is True, "a folder holding a link is never taken from what was kept"
