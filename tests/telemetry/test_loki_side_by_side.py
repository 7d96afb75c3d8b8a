"""Kernel logs and job logs both from one Loki: their queries run at once, together within
`ATTRIBUTION_LOKI_CONCURRENCY`, and each source's findings and failures stay its own.

A stub Loki (bench/loki_stub.py) evaluates the provider's LogQL for real; its store here holds each query it answers
for a while and keeps count of the kernel-log and job-log queries it holds at once.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from bench.joblog_scan import _failure, node_name
from bench.loki_stub import LogStore, Stream, StubLoki
from providers.telemetry import TelemetryProvider

DETECTED = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
HOLD_S = 0.05
XID = "kernel: [1000.000000] NVRM: Xid (PCI:0000:91:00): 79, pid=1, GPU has fallen off the bus."


def _ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


class _Holding(LogStore):
    """Answers each query after holding it HOLD_S, counting the kernel-log and job-log queries held at once."""

    def __init__(self, streams: Any, fail_job: bool = False) -> None:
        super().__init__(streams)
        self.fail_job = fail_job
        self.held = {"kernel": 0, "job": 0}
        self.together = 0  # answers during which a query of the other source was held too
        self.most = 0

    def answer(self, path: str, params: Any) -> tuple[int, bytes]:
        kind = "kernel" if 'job="syslog"' in params.get("query", "") else "job"
        other = "job" if kind == "kernel" else "kernel"
        with self._lock:
            self.held[kind] += 1
            self.most = max(self.most, sum(self.held.values()))
        try:
            time.sleep(HOLD_S)
            with self._lock:
                self.together += self.held[other] > 0
            if kind == "job" and self.fail_job:
                return 502, b"{}"
            return super().answer(path, params)
        finally:
            with self._lock:
                self.held[kind] -= 1


def _store(nodes: int, fail_job: bool = False) -> _Holding:
    at = _ns(DETECTED - timedelta(seconds=60))
    streams = []
    for n in range(nodes):
        failure = [(at + i * 1_000_000, line) for i, line in enumerate(_failure(n).splitlines())]
        streams.append(Stream({"job": "job-1", "host": node_name(n)}, failure))
        kernel = [(at, f"{node_name(n)} {XID}")] if n == 1 else [(at, f"{node_name(n)} kernel: eth0: link up")]
        streams.append(Stream({"job": "syslog", "host": node_name(n)}, kernel))
    return _Holding(streams, fail_job)


def _ask(url: str, nodes: int, concurrency: int | None = None, timeout_ms: int = 30000) -> dict[str, Any]:
    """POST a fast request for `nodes` nodes (8 ranks each) through the Flask test client; with `concurrency`, that
    setting and a page of 20 entries (a few pages a query, so that both sources have queries to send), else the
    defaults."""
    options = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": url,
        "ATTRIBUTION_LOKI_SELECTOR": '{job="syslog", host=~"{hosts}"}',
        "ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="{workload_id}"}',
    }
    if concurrency is not None:
        options |= {"ATTRIBUTION_LOKI_CONCURRENCY": str(concurrency), "ATTRIBUTION_LOKI_LIMIT": "20"}
    provider = TelemetryProvider.from_options(options)
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    answer = client.post("/v1/attribution", json={
        "schema_version": "0.1.0", "workload_id": "job-1",
        "scope": {"nodes": [node_name(n) for n in range(nodes)], "ranks": list(range(8 * nodes))},
        "failure_context": {"detected_at": DETECTED.isoformat().replace("+00:00", "Z"),
                            "detection_signal": "application_error"},
        "timeout_ms": timeout_ms, "workload_context": {"workflow_id": "w", "attempt_index": 0}, "phase": "fast",
    })
    assert answer.status_code == 200
    return answer.get_json()


@pytest.mark.parametrize("concurrency", [1, 3])
def test_kernel_and_job_log_queries_run_at_once_within_the_setting(concurrency: int) -> None:
    store = _store(4)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 4, concurrency)
        stats = loki.stats()
    # node-0001's GPU fell off the bus (its kernel log); every rank's watchdog timed out (the job logs): the
    # kernel finding names the node, the job logs' timeouts stand beside it as its context or a job finding
    assert (node_name(1), "gpu_off_bus") in [(f["target"].get("name"), f["error_category"])
                                              for f in body["attributions"]]
    assert store.most <= concurrency and stats["most_in_flight"] <= concurrency
    if concurrency > 1:
        assert store.together > 0  # a kernel-log query was answered while a job-log query was held, or back
    else:
        assert store.together == 0


def test_a_failing_job_log_query_leaves_the_kernel_finding_and_says_so() -> None:
    store = _store(2, fail_job=True)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 2, 4)
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [(node_name(1),
                                                                                          "gpu_off_bus")]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "the job logs could not be read (the Loki job-log source answered HTTP 502)" in body["error"]["message"]


def test_a_kernel_loki_source_that_fails_is_the_answers_error_though_the_job_logs_were_read() -> None:
    # every kernel-log query answered 502: the source fails as a whole (a typed service_error, no finding), as when
    # the kernel logs were read first
    class KernelFails(_Holding):
        def answer(self, path: str, params: Any) -> tuple[int, bytes]:
            if 'job="syslog"' in params.get("query", ""):
                return 502, b"{}"
            return super().answer(path, params)

    store = KernelFails(_store(2).streams)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 2, 4)
    assert body["attributions"] == []
    assert body["error"]["type"] == "service_error"
    assert "answered HTTP 502" in body["error"]["message"]


def test_a_query_that_gets_no_shared_slot_before_the_waiting_stops_is_unfinished() -> None:
    # one slot, held by the kernel logs' long query: the job logs' query (which, without the shared slot, would
    # answer at once) is yielded NotFinished when their waiting stops; the kernel logs' query ends with its result
    import threading as th

    from providers.telemetry.loki.fanout import NotFinished, Pool, Slots

    slots = Slots(1)
    release = th.Event()
    started: list[str] = []

    def kernel_query() -> str:
        started.append("kernel")
        release.wait(10)
        return "kernel lines"

    def job_query() -> str:
        started.append("job")
        return "job lines"

    kernel = Pool(1, time.monotonic() + 30, "k", slots)
    kernel.add(kernel_query, "kernel")
    while not started:
        time.sleep(0.01)
    job = Pool(1, time.monotonic() + 0.2, "j", slots)
    job.add(job_query, "job")
    (tag, result), = list(job.results())
    assert tag == "job" and isinstance(result, NotFinished)
    release.set()
    assert list(kernel.results()) == [("kernel", "kernel lines")]


def test_slots_are_taken_in_the_order_asked_so_a_busy_pool_cannot_starve_the_other() -> None:
    # one slot: the job logs' pool runs call after call, asking again the moment it gives the slot back; the kernel
    # logs' one call, asked for while the first job-log call held the slot, runs next
    import threading as th

    from providers.telemetry.loki.fanout import Pool, Slots

    slots = Slots(1)
    order: list[str] = []
    first_holds = th.Event()
    kernel_asked = th.Event()

    def job_call(n: int) -> str:
        order.append(f"job-{n}")
        if n == 0:
            first_holds.set()
            kernel_asked.wait(10)  # the slot is held until the kernel call is in line
        return "lines"

    job = Pool(1, time.monotonic() + 30, "j", slots)
    for n in range(6):
        job.add(lambda n=n: job_call(n), n)
    first_holds.wait(10)
    kernel = Pool(1, time.monotonic() + 30, "k", slots)
    kernel.add(lambda: order.append("kernel") or "kernel lines", "kernel")
    for _ in range(1000):  # bounded: the kernel call is queued within moments
        if slots.waiting:  # the kernel call is in line
            break
        time.sleep(0.005)
    kernel_asked.set()
    assert list(kernel.results()) == [("kernel", "kernel lines")]
    assert len(list(job.results())) == 6
    assert order[:2] == ["job-0", "kernel"]  # right after the call that held the slot, not after the job logs' last


def test_results_finished_while_the_consumer_was_busy_past_the_waiting_are_not_taken() -> None:
    # two calls finish at once; the consumer spends past the pool's waiting time on the first: the second, finished
    # but not yet taken, is yielded unfinished (what arrives after the time to read it is named, not read)
    from providers.telemetry.loki.fanout import NotFinished, Pool

    until = time.monotonic() + 0.3
    pool = Pool(2, until, "p")
    pool.add(lambda: "first", 0)
    pool.add(lambda: "second", 1)
    time.sleep(0.1)  # both finished before the first is taken
    taken = []
    for tag, result in pool.results():
        taken.append((tag, result))
        while time.monotonic() < until + 0.05:  # the consumer busy past the waiting time (bounded by it)
            time.sleep(0.01)
    assert taken[0] == (0, "first")
    assert taken[1][0] == 1 and isinstance(taken[1][1], NotFinished)


def test_at_the_deadline_what_was_read_stands_and_the_unread_job_logs_are_named() -> None:
    # 64 nodes, read 8 queries at once: two job-log batches of 32 nodes. The job-log queries of the second batch
    # (node-0032 .. node-0063) are held past the request's deadline; everything else answers. The kernel finding
    # (node-0001's GPU fell off the bus) stands, and the answer names the 32 nodes whose job logs were not read,
    # not a bare timeout.
    class SecondBatchHangs(_Holding):
        def answer(self, path: str, params: Any) -> tuple[int, bytes]:
            query = params.get("query", "")
            if 'job="job-1"' in query and "node-0040" in query:
                time.sleep(5)
            return super().answer(path, params)

    store = SecondBatchHangs(_store(64).streams)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 64, timeout_ms=2000)
    assert (node_name(1), "gpu_off_bus") in [(f["target"].get("name"), f["error_category"])
                                              for f in body["attributions"]]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "the job-log lines of 32 node(s) were not read from Loki before the deadline" in body["error"]["message"]


def test_kernel_logs_late_everywhere_leave_the_job_logs_finding_and_name_the_unread_kernel_logs() -> None:
    # The kernel-log query is held past the deadline; the job logs answer: node-0002's ranks fell silent (training
    # lines only) while every other rank's watchdog timed out. The job logs' finding stands and the answer says the
    # deadline came before every node's kernel logs were read: not a bare timeout.
    class KernelHangs(_Holding):
        def answer(self, path: str, params: Any) -> tuple[int, bytes]:
            if 'job="syslog"' in params.get("query", ""):
                time.sleep(5)
            return super().answer(path, params)

    streams = [s for s in _store(4).streams if not (s.labels["job"] == "job-1" and s.labels["host"] == node_name(2))]
    at = _ns(DETECTED - timedelta(seconds=90))
    streams.append(Stream({"job": "job-1", "host": node_name(2)},
                          [(at + r, f"[rank{r}]: {{'loss': 2.0, 'step': 1}}") for r in range(16, 24)]))
    store = KernelHangs(streams)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 4, timeout_ms=2000)
    assert [(f["target"].get("name"), f["error_category"]) for f in body["attributions"]] == [
        (node_name(2), "collective_hang")
    ]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "the deadline came before the kernel logs of 4 of 4 nodes were read" in body["error"]["message"]


def test_job_logs_late_everywhere_leave_the_kernel_finding_and_say_so() -> None:
    # Every job-log query is held past the deadline while the kernel logs, read at the same time, answer (node-0001's
    # GPU fell off the bus). The kernel finding stands beside a note on the job logs: not a bare timeout.
    class JobLogsHang(_Holding):
        def answer(self, path: str, params: Any) -> tuple[int, bytes]:
            if 'job="job-1"' in params.get("query", ""):
                time.sleep(5)
            return super().answer(path, params)

    store = JobLogsHang(_store(4).streams)
    with StubLoki(0.0, store=store) as loki:
        body = _ask(loki.url, 4, 8, timeout_ms=2000)
    assert [(f["target"].get("name"), f["error_category"]) for f in body["attributions"]] == [
        (node_name(1), "gpu_off_bus")
    ]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert ("the job logs could not be read (the Loki job-log source did not answer in time): no job-log evidence "
            "was used") in body["error"]["message"]
