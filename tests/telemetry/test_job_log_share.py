"""A request's job-log files read by this process and a scan process forked from it (job_log_share.py).

What the two read together is what one reader reads alone: the same `JobLogRead` and the same parsed logs, whether
the process hands over every part, fails on one, hands over one that does not decode, dies in the middle or dies
holding the shared lock. The process takes its share only when a plan comes, and answers at once when none does.
The path through real gunicorn workers is pinned in tests/process/test_scan_process.py.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import multiprocessing
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.joblog_scan import _failure, _training_block, node_name
from providers.base import Deadline
from providers.telemetry import job_log_share
from providers.telemetry.identity import NodeNames
from providers.telemetry.job_log_share import serve_share
from providers.telemetry.joblog import files as job_files
from providers.telemetry.joblog.files import ReadLimits
from providers.telemetry.joblog.scan import JobLogScan, scan_job_logs
from providers.telemetry.joblog.source import FileJobLogSource, resolver
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.scan_process import ScanProcess
from providers.telemetry.window import Window
from tests.joblog import fixtures as fx
from tests.joblog.support import write_tree

WORKLOAD = "job-7"
NODES = [node_name(n) for n in range(72)]
T0 = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
WINDOW = Window(T0 - timedelta(minutes=15), T0 + timedelta(minutes=2))
LOGGER = "attribution_adapter.telemetry"


def _tree(root: Path) -> Path:
    """72 nodes' job logs: training output and failures of every kind the parser reads, rotated and gzip files, an
    empty file, a corrupt `.gz`, and nodes without files."""
    files: dict[str, bytes | str | list[str]] = {}
    groups = [fx.LLAMAFACTORY_6269, fx.MMM_AURORA_RANK0, fx.NCCL_1405_IB, fx.PYTORCH_152623_DESYNC, fx.CPPO_6_SIGKILL,
              fx.DEVICES_UNAVAILABLE]
    for n, node in enumerate(NODES):
        if n % 17 == 5:
            continue  # no file
        text = "".join(_training_block(n, step) for step in range(30 + n))
        if n % 3 == 0:
            text += _failure(n)
        if n % 5 == 1:
            text += "\n".join(groups[n % len(groups)]) + "\n"
        files[f"{node}.log"] = text
        if n % 7 == 2:
            files[f"{node}.log.1"] = "".join(_training_block(n, step) for step in range(20))
        if n % 11 == 3:
            files[f"{node}.log.2.gz"] = _failure(n)
    files[f"{NODES[4]}.log"] = ""
    folder = write_tree(root, files, WORKLOAD)
    (folder / f"{NODES[8]}.log.1.gz").write_bytes(b"not gzip at all")
    return root


def _quick_scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: object) -> Collector:
    collector = Collector(nodes, window)
    collector.finish()
    return collector


class _Spy:
    """The partner a read is given, keeping the worker's side of the share to look at afterwards."""

    def __init__(self, pending) -> None:  # noqa: ANN001
        self.pending = pending
        self.share = None

    def begin(self, plan):  # noqa: ANN001, ANN202
        self.share = self.pending.begin(plan)
        return self.share


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _tree(tmp_path / "jobs")


def _serving(root: Path):  # noqa: ANN202
    """The provider's share of the job logs under `root` (what `after_fork` hands the scan process)."""
    return functools.partial(serve_share, FileJobLogSource(root))


@pytest.fixture
def started(root: Path, scan_processes):  # noqa: ANN001, ANN201
    """`start(share)`: a scan process of this test process sharing the job logs under `root` (`share` defaults to
    the provider's), stopped and reaped at the end (tests/telemetry/conftest.py)."""
    return lambda share=None: scan_processes(_quick_scan, (), share or _serving(root))


def _alone(root: Path, limits: ReadLimits | None = None) -> JobLogScan:
    return scan_job_logs(root, WORKLOAD, 0, NODES, Deadline.after_ms(30_000), limits=limits,
                         resolver_factory=resolver)  # fmt: skip


def _shared(
    process: ScanProcess, root: Path, limits: ReadLimits | None = None, deadline: Deadline | None = None
) -> tuple[JobLogScan, _Spy]:
    deadline = deadline or Deadline.after_ms(30_000)
    with process.asked(NodeNames(NODES), WINDOW, deadline, job_logs=True) as pending:
        assert pending is not None
        spy = _Spy(pending)
        got = scan_job_logs(root, WORKLOAD, 0, NODES, deadline, limits=limits, resolver_factory=resolver,
                            partner=spy)  # fmt: skip
        assert pending.collector(UTC) is not None or process.pid == 0
    return got, spy


def _slow_worker(monkeypatch: pytest.MonkeyPatch, seconds: float = 0.004) -> None:
    """This process reads each node `seconds` slower (the scan process, forked before, does not): it takes parts."""
    real = job_files._read_node

    def read_node(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(job_files, "_read_node", read_node)


def _as_alone(process: ScanProcess, root: Path, monkeypatch: pytest.MonkeyPatch) -> _Spy:
    """Read `root` alone, then shared with `process` (this process slower a node): the two reads are equal."""
    want = _alone(root)
    _slow_worker(monkeypatch)
    got, spy = _shared(process, root)
    assert got == want
    return spy


def _theirs(spy: _Spy) -> int:
    """Nodes the scan process handed over."""
    assert spy.share is not None
    return sum(len(part) for part in spy.share._answered)


def test_a_read_shared_with_the_scan_process_is_the_read_of_one_reader(started, root, monkeypatch):
    process = started()
    want = _alone(root)
    assert len(want.read.nodes) == 68 and want.read.nodes[NODES[8]].skipped  # the corrupt `.gz`
    for kind in ("timeouts", "progress", "tracebacks", "network", "desync", "failures", "cuda"):
        assert any(getattr(log, kind) for log in want.logs.values()), kind
    _slow_worker(monkeypatch)
    for _ in range(3):  # the process serves one request after another
        got, spy = _shared(process, root)
        assert got == want
        assert 0 < _theirs(spy) < len(want.read.nodes), "each read some of the nodes"
    assert process.pid > 0


def test_the_byte_bounds_are_shared_by_both_readers(started, root, monkeypatch):
    """With a request bound smaller than the files, the two readers' bytes together keep it, and the nodes whose
    share did not settle them are read further back from the one reserve."""
    limits = ReadLimits(node_bytes=64 * 1024, request_bytes=200 * 1024)
    want = _alone(root, limits)
    assert want.read.request_cut is False and any(r.cut for r in want.read.nodes.values())
    # The reserve goes to the nodes that ask first: alone, NODES[1] asks first and takes it all. The process's share
    # begins once the worker has read NODES[1], so that it asks first here too (else the process, reading from the
    # end, may ask first for a node of its own when the machine is busy: as the design allows, not as this test asks)
    asked = multiprocessing.get_context("fork").Event()

    def share(*args):  # noqa: ANN002, ANN202 - in the scan process
        asked.wait(10.0)
        return _serving(root)(*args)

    process = started(share)
    _slow_worker(monkeypatch)
    slow_read = job_files._read_node

    def read_node(node, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        read = slow_read(node, *args, **kwargs)
        if node == NODES[1]:
            asked.set()
        return read

    monkeypatch.setattr(job_files, "_read_node", read_node)
    got, spy = _shared(process, root, limits)
    assert _theirs(spy) > 0
    assert got.read.bytes_read == sum(r.bytes_read for r in got.read.nodes.values()) <= limits.request_bytes
    assert set(got.read.nodes) == set(want.read.nodes) and got.read.late == ()
    # each node's share is the plan's: a node read from its share alone took the same bytes both ways; the reserve
    # for reading further back goes to the nodes that ask for it first, in either reader's order
    for node, read in want.read.nodes.items():
        if not read.further and not got.read.nodes[node].further:
            assert got.read.nodes[node] == read, node
    # the reserve is one: it let one node be read further back alone, and it did in the two readers together
    assert [n for n, r in want.read.nodes.items() if r.further] == [NODES[1]]
    assert len([n for n, r in got.read.nodes.items() if r.further]) == 1


def test_a_part_the_process_cannot_read_is_read_by_the_worker_and_what_it_logged_is_written_here(
    started, root, monkeypatch, caplog
):
    def share(nodes, value, state, deadline, send):  # noqa: ANN001, ANN202 (runs in the scan process)
        real = job_log_share.read_planned
        calls = []

        def failing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("a part that cannot be read")
            return real(*args, **kwargs)

        job_log_share.read_planned = failing
        serve_share(FileJobLogSource(root), nodes, value, state, deadline, send)

    process = started(share)
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        spy = _as_alone(process, root, monkeypatch)
    assert spy.share is not None and spy.share._failed and _theirs(spy) > 0
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
    assert len(said) == 1  # with its traceback, written here by the worker
    assert said[0].startswith("the scan process could not read a part of the job logs\nTraceback")
    assert said[0].endswith("RuntimeError: a part that cannot be read")
    assert process.pid > 0, "the process serves on"


def test_a_part_that_does_not_decode_is_read_by_the_worker(started, root, monkeypatch, caplog):
    def share(nodes, value, state, deadline, send):  # noqa: ANN001, ANN202 (runs in the scan process)
        gen = value["gen"]
        part = state.claim(gen, 3, from_end=True)
        send(json.dumps({"gen": gen, "part": [part.start, part.stop], "reads": [["x"]], "logs": [],
                         "late": []}).encode())  # fmt: skip
        part = state.claim(gen, 2, from_end=True)  # a part naming nodes it did not claim
        send(json.dumps({"gen": gen, "part": [part.start, part.stop], "reads": [], "logs": [],
                         "late": [NODES[0], NODES[1]]}).encode())  # fmt: skip
        serve_share(FileJobLogSource(root), nodes, value, state, deadline, send)

    process = started(share)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _as_alone(process, root, monkeypatch)
    said = [r.getMessage() for r in caplog.records if "a job-log part of the scan process could not be read" in
            r.getMessage()]  # fmt: skip
    assert len(said) == 2 and all(s.endswith(": the worker reads it") for s in said)


def test_a_process_that_dies_in_the_middle_of_its_share_leaves_its_parts_to_the_worker(started, root, monkeypatch):
    def share(nodes, value, state, deadline, send):  # noqa: ANN001, ANN202 (runs in the scan process)
        state.claim(value["gen"], 5, from_end=True)
        os.kill(os.getpid(), signal.SIGKILL)

    process = started(share)
    pid = process.pid
    assert _theirs(_as_alone(process, root, monkeypatch)) == 0
    assert process.pid == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped


def test_a_process_that_dies_holding_the_lock_is_given_up_and_the_worker_reads_without_it(
    started, root, monkeypatch, caplog
):
    monkeypatch.setattr(job_log_share, "LOCK_WAIT_S", 0.2)

    def share(nodes, value, state, deadline, send):  # noqa: ANN001, ANN202 (runs in the scan process)
        state._lock.acquire()
        os.kill(os.getpid(), signal.SIGKILL)

    process = started(share)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _as_alone(process, root, monkeypatch)
    assert process.pid == 0
    messages = [r.getMessage() for r in caplog.records]
    assert "the job-log share's lock was held for over 0.2 s: the other reader is given up" in messages


def test_without_a_plan_the_process_answers_at_once(started, tmp_path):
    process = started()
    t0 = time.monotonic()
    # no job-log folder for this attempt: nothing to share, and the process is told so
    with process.asked(NodeNames(NODES), WINDOW, Deadline.after_ms(60_000), job_logs=True) as pending:
        assert pending is not None
        got = scan_job_logs(tmp_path / "nothing", WORKLOAD, 0, NODES, Deadline.after_ms(60_000),
                            resolver_factory=resolver, partner=pending.partner())  # fmt: skip
        assert not got.read.found
        assert pending.collector(UTC) is not None
    # and when the asker fails before it reads the job logs, leaving the block
    with pytest.raises(RuntimeError):
        with process.asked(NodeNames(NODES), WINDOW, Deadline.after_ms(60_000), job_logs=True) as pending:
            raise RuntimeError("the request failed")
    with process.asked(NodeNames(NODES), WINDOW, Deadline.after_ms(60_000), job_logs=True) as pending:
        assert pending is not None and pending.collector(UTC) is not None
    assert time.monotonic() - t0 < 30, "no wait for the deadline"


def test_past_the_deadline_both_readers_name_the_nodes_left_unread(started, root, monkeypatch):
    process = started()
    _slow_worker(monkeypatch, 0.05)
    got, _ = _shared(process, root, deadline=Deadline.after_ms(600))
    late = set(got.read.late)
    assert late and set(got.read.nodes).isdisjoint(late)
    assert set(got.read.nodes) | late == {n for n in NODES if (Path(root) / WORKLOAD / "0" / f"{n}.log").exists()
                                          or any((Path(root) / WORKLOAD / "0").glob(f"{n}.log.*"))}
    assert set(got.logs) <= set(got.read.nodes)
    assert got.read.late == tuple(n for n in NODES if n in late), "named in scope order"


def test_a_gzip_file_read_by_the_process_is_the_same(started, tmp_path, monkeypatch):
    root = tmp_path / "gz"
    folder = root / WORKLOAD / "0"
    folder.mkdir(parents=True)
    for n, node in enumerate(NODES[:40]):
        (folder / f"{node}.log.1.gz").write_bytes(gzip.compress(_failure(n).encode(), mtime=0))
        (folder / f"{node}.log").write_text(_training_block(n, 1))
    process = started(_serving(root))
    assert _theirs(_as_alone(process, root, monkeypatch)) > 0


def test_work_numbers_beyond_64_bits_are_handed_over_exactly(started, tmp_path, monkeypatch, caplog):
    """orjson writes no integer beyond 64 bits: a part holding one goes as the standard library writes it, and comes
    back the same (not as a float the worker would refuse)."""
    root = tmp_path / "wide"
    folder = root / WORKLOAD / "0"
    folder.mkdir(parents=True)
    huge = -(10**19 - 1)  # a progress line's numbers are up to 19 digits and signed: below -2**63
    for n, node in enumerate(NODES[:40]):
        progress = (f"[rank{n}]:[E909 17:59:58.000465280 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                    f"Rank {n}] Exception (either an error or timeout) detected by watchdog at work: {huge}, last "
                    f"enqueued NCCL work: {huge}, last completed NCCL work: {huge}.\n")  # fmt: skip
        (folder / f"{node}.log").write_text(_training_block(n, 1) + (progress if n % 2 else ""))
    assert any(p.last_completed == huge for log in _alone(root).logs.values() for p in log.progress)
    process = started(_serving(root))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert _theirs(_as_alone(process, root, monkeypatch)) > 0
    assert not [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING], "every part decoded"
    assert job_log_share.decode_part(job_log_share.encode_part({"n": huge, "s": "\ud800"})) == {"n": huge,
                                                                                                "s": "\ud800"}


def test_without_shared_memory_the_process_scans_and_the_worker_reads_every_job_log(
    scan_processes, monkeypatch, caplog
):
    from providers.telemetry import scan_process

    def no_shared_memory() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scan_process, "SharedState", no_shared_memory)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        process = scan_processes(_quick_scan, (), lambda *args: None)
    assert "the kernel-log scan process reads no job logs ([Errno 28] No space left on device): the worker " \
           "reads them all" in [r.getMessage() for r in caplog.records]  # fmt: skip
    with process.asked(NodeNames(NODES), WINDOW, Deadline.after_ms(30_000), job_logs=True) as pending:
        assert pending is not None and pending.partner() is None
        assert pending.collector(UTC) is not None


def _many(root: Path, count: int) -> list[str]:
    """`count` nodes with long names, one small job log each: a plan larger than a pipe's buffer."""
    names = [f"n{n:04d}-" + "x" * 200 for n in range(count)]
    write_tree(root, {f"{name}.log": f"[rank{n}]: step 1\n" for n, name in enumerate(names)}, WORKLOAD)
    return names


def _sleepy(seconds: float):  # noqa: ANN202
    def scan(nodes: NodeNames, window: Window, deadline: Deadline, proof: object) -> Collector:
        time.sleep(seconds)
        return _quick_scan(nodes, window, deadline, proof)

    return scan


def test_a_plan_larger_than_the_pipe_does_not_keep_the_worker_waiting_for_the_process_s_scan(
    tmp_path, scan_processes
):
    root = tmp_path / "many"
    names = _many(root, 1200)
    process = scan_processes(_sleepy(4.0), (), _serving(root))
    deadline = Deadline.after_ms(30_000)
    with process.asked(NodeNames(names), WINDOW, deadline, job_logs=True) as pending:
        assert pending is not None
        t0 = time.monotonic()
        got = scan_job_logs(root, WORKLOAD, 0, names, deadline, resolver_factory=resolver,
                            partner=pending.partner())  # fmt: skip
        read_s = time.monotonic() - t0
        assert pending.collector(UTC) is not None
    assert len(got.read.nodes) == 1200 and got.read.late == ()
    assert read_s < 4.0, "the worker read its job logs while the process scanned"
    assert process.pid > 0


@pytest.mark.parametrize(("scan_s", "then_s"), [(1.0, 0.0), (0.0, 0.5)], ids=["before-its-share", "in-its-share"])
def test_a_request_that_fails_after_handing_over_its_plan_leaves_the_pipe_fit_for_the_next(
    tmp_path, scan_processes, scan_s, then_s
):
    """The process still scanning (it finds nothing left to claim), or already sending parts nobody reads: either way
    the next request's ask is read whole and answered."""
    root = tmp_path / "many"
    names = _many(root, 1200)
    process = scan_processes(_sleepy(scan_s), (), _serving(root))
    with pytest.raises(RuntimeError):
        with process.asked(NodeNames(names), WINDOW, Deadline.after_ms(30_000), job_logs=True) as pending:
            assert pending is not None
            plan = job_files.plan_job_logs(root, WORKLOAD, 0, names, resolver(names), Deadline.after_ms(30_000))
            assert pending.begin(plan) is not None
            time.sleep(then_s)
            raise RuntimeError("the request failed before its job logs were read")
    # the next ask is read whole by the process (its plan sent before it), and answered
    deadline = Deadline.after_ms(30_000)
    with process.asked(NodeNames(names), WINDOW, deadline, job_logs=True) as pending:
        assert pending is not None
        got = scan_job_logs(root, WORKLOAD, 0, names, deadline, resolver_factory=resolver,
                            partner=pending.partner())  # fmt: skip
        assert pending.collector(UTC) is not None
    assert len(got.read.nodes) == 1200
    assert process.pid > 0


def test_a_worker_read_that_fails_in_the_middle_ends_the_share_at_once_and_the_next_request_is_served(
    started, root, monkeypatch
):
    """The process takes a second a part; the worker's read fails in its first part: the process claims no more, so
    its answer comes after the part it was reading, not after all of them."""

    def share(nodes, value, state, deadline, send):  # noqa: ANN001, ANN202 (runs in the scan process)
        real_part = job_log_share.read_planned

        def slow(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            time.sleep(1.0)
            return real_part(*args, **kwargs)

        job_log_share.read_planned = slow
        serve_share(FileJobLogSource(root), nodes, value, state, deadline, send)

    process = started(share)
    want = _alone(root)
    real = job_files._read_node
    calls = []

    def failing(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        if len(calls) == 5:
            time.sleep(0.3)  # the process is in its first part
            raise RuntimeError("a read that fails")
        return real(*args, **kwargs)

    monkeypatch.setattr(job_files, "_read_node", failing)
    deadline = Deadline.after_ms(30_000)
    with process.asked(NodeNames(NODES), WINDOW, deadline, job_logs=True) as pending:
        assert pending is not None
        with pytest.raises(RuntimeError, match="a read that fails"):
            scan_job_logs(root, WORKLOAD, 0, NODES, deadline, resolver_factory=resolver, partner=pending.partner())
        t0 = time.monotonic()
        assert pending.collector(UTC) is not None
        # one part of a second, not the three more the process would have claimed (the plan's 52 other nodes)
        assert time.monotonic() - t0 < 2.5
    assert process.pid > 0, "the share was ended, not the process"
    monkeypatch.setattr(job_files, "_read_node", real)
    got, _ = _shared(process, root)
    assert got == want
