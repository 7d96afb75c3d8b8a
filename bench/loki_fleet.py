"""Benchmark: a fleet's job logs and kernel logs on a stub Loki answering each query in 50 ms, default settings.

The stub (bench/loki_stub.py, in a process of its own so that it does not share the measured process's
interpreter) holds, for each of `--nodes` nodes (default 4,096), a job-log stream of eight ranks' training lines and
NCCL INFO lines (`--training-lines` per rank, one every 100 ms) ending in the failure of bench/joblog_scan.py: every
rank's NCCL watchdog timeout and progress line and torchelastic's summary, except on one node (`--silent-node`)
whose ranks fell silent; and a kernel-log stream per node without any finding. With `--dump-lines N` the silent
node's ranks print N lines of a stack dump after their last training line (they still report no timeout).

The open provider answers one `fast` request in process (scope: every node and every rank, a 10 s deadline): the
culprit is the silent node, `collective_hang`. Printed: the time to the answer, the CPU time this process and the
stub spent meanwhile (the machine's speed may move between runs: a request that took more CPU time took more work),
the queries the stub answered, the
bytes of JSON it sent (all read by the provider), the most queries it held at once, the queries it answered later
than its delay (its own work on a query's first sight taking longer: such a run's time is partly the stub's), and
whether the culprit was named. `--repeat` runs, each request with its own failure time. With `--warm-stub` the stub
first answers one request of another provider, untimed, so that the timed provider's first request is not partly
the stub's own work.

    python bench/loki_fleet.py [--nodes 4096] [--delay-ms 50] [--repeat 3] [--warm-stub]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import cpu_seconds  # noqa: E402 - after the path tweak
from bench.joblog_scan import RANKS_PER_NODE, WORKLOAD, _failure, node_name  # noqa: E402
from bench.loki_stub import LogStore, Run, Stream, StubLoki  # noqa: E402
from providers.base import (  # noqa: E402
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.telemetry import TelemetryProvider  # noqa: E402
from providers.telemetry.collection import collector_paused  # noqa: E402
from providers.telemetry.joblog import conclude  # noqa: E402
from providers.telemetry.joblog.loki import LokiJobLogSource, _Read  # noqa: E402
from providers.telemetry.joblog.source import resolver  # noqa: E402

DETECTED = datetime(2026, 9, 9, 12, tzinfo=UTC)
STEP_NS = 100_000_000
#: the failure's lines, one per millisecond, end this long before the failure time
FAILURE_LEAD_NS = 30 * 1_000_000_000


def _ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000


def _training(node: int, local: int) -> object:
    rank = node * RANKS_PER_NODE + local
    return lambda i: (f"[rank{rank}]: {{'loss': 2.{(i * 7 + rank) % 1000:03d}, 'grad_norm': 0.{i % 97:02d}, "
                      f"'learning_rate': 1.2e-05, 'epoch': 0.{i % 89:02d}, 'step': {i}}}")


def _nccl_info(node: int) -> object:
    return lambda i: (f"{node_name(node)}:{4100 + node}:{4200 + node} [0] NCCL INFO comm 0x5568d8a0 rank "
                      f"{node * RANKS_PER_NODE} nranks {RANKS_PER_NODE * 1024} cudaDev 0 busId 18000 - Init COMPLETE")


def _kernel(node: int) -> object:
    return lambda i: f"{node_name(node)} kernel: [{1000 + i}.000000] EXT4-fs (nvme0n1p1): mounted filesystem"


def build(nodes: int, silent: int, training: int, dump: int) -> LogStore:
    end = _ns(DETECTED) - FAILURE_LEAD_NS
    first = end - training * STEP_NS
    streams = []
    for n in range(nodes):
        runs = [Run(first + local * 1000, STEP_NS, training, _training(n, local)) for local in range(RANKS_PER_NODE)]
        runs.append(Run(first + 9000, STEP_NS, training, _nccl_info(n)))
        lines: list[tuple[int, str]] = []
        if n == silent:
            for local in range(RANKS_PER_NODE if dump else 0):
                rank = n * RANKS_PER_NODE + local
                runs.append(Run(end + local * 1000, 1_000_000, dump, lambda i, r=rank: (
                    f"[rank{r}]:   frame #{i}: 0x7f3a{i:08x} in c10d::ProcessGroupNCCL::WorkNCCL::wait (libtorch.so)")))
        else:
            lines = [(end + i * 1_000_000, text) for i, text in enumerate(_failure(n).splitlines())]
        streams.append(Stream({"job": WORKLOAD, "host": node_name(n)}, lines, runs))
        streams.append(Stream({"job": "syslog", "host": node_name(n)}, [], [Run(first, 10 * STEP_NS, 2, _kernel(n))]))
    return LogStore(streams)


def parser_alone(nodes: int, silent: int) -> tuple[float, float, int]:
    """(seconds to parse, seconds for the rules, lines): the part of the answer's time that no query takes, with the
    garbage collector paused as the provider pauses it (providers/telemetry/collection.py)."""
    with collector_paused():
        return _parser_alone(nodes, silent)


def _parser_alone(nodes: int, silent: int) -> tuple[float, float, int]:
    names = [node_name(i) for i in range(nodes)]
    resolve = resolver(names)
    end = _ns(DETECTED) - FAILURE_LEAD_NS
    started = time.perf_counter()
    logs, count = {}, 0
    for n, name in enumerate(names):
        if n == silent:
            continue
        got = _Read()
        got.add({name: [(end + i * 1_000_000, line) for i, line in enumerate(_failure(n).splitlines())]})
        count += len(got.lines[name])
        logs.update(LokiJobLogSource._parse([name], got, resolve))  # as the source parses a node's entries
    parsed = time.perf_counter()
    conclude(names, list(range(nodes * RANKS_PER_NODE)), logs)
    return parsed - started, time.perf_counter() - parsed, count


def serve(args: argparse.Namespace) -> None:
    """The child: build the stub's streams, print the URL, serve until stdin closes."""
    store = build(args.nodes, args.silent_node, args.training_lines, args.dump_lines)
    with StubLoki(args.delay_ms / 1000, store=store) as loki:
        print(loki.url, flush=True)
        sys.stdin.read()


def _cpu_s(pid: int) -> float:
    """The CPU time process `pid` has spent (`_servers.cpu_seconds`), or NaN where it cannot be read."""
    try:
        return cpu_seconds(pid)
    except (OSError, ValueError, IndexError):
        return float("nan")


def _get(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - the stub on 127.0.0.1
        return json.loads(answer.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4096)
    parser.add_argument("--silent-node", type=int, default=2713)
    parser.add_argument("--training-lines", type=int, default=600, help="training lines per rank in the window")
    parser.add_argument("--dump-lines", type=int, default=0, help="stack-dump lines per rank of the silent node")
    parser.add_argument("--delay-ms", type=int, default=50, help="the stub's time to answer each query")
    parser.add_argument("--timeout-ms", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a provider setting other than its default (e.g. ATTRIBUTION_LOKI_CONCURRENCY=16)")
    parser.add_argument("--warm-stub", action="store_true",
                        help="before the timed runs, one untimed request of another provider built the same way, so "
                             "that the stub's own work on a query's first sight is done before them")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the child's entry
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--nodes", str(args.nodes), "--silent-node", str(args.silent_node),
         "--training-lines", str(args.training_lines), "--dump-lines", str(args.dump_lines),
         "--delay-ms", str(args.delay_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        options = {
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
            "ATTRIBUTION_LOKI_URL": url,
            "ATTRIBUTION_LOKI_SELECTOR": '{job="syslog", host=~"{hosts}"}',
            "ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="{workload_id}"}',
            **dict(item.split("=", 1) for item in args.set),
        }
        provider = TelemetryProvider.from_options(options)
        names = tuple(node_name(i) for i in range(args.nodes))
        culprit = node_name(args.silent_node)
        print(f"stub Loki at {url}: {args.nodes} nodes x {RANKS_PER_NODE} ranks, {args.training_lines} training "
              f"lines per rank, {args.dump_lines} dump lines per silent rank, {args.delay_ms} ms per query; "
              + (f"settings {', '.join(args.set)}" if args.set else "default settings"))

        def request_of(run: int) -> AttributionRequest:
            detected = DETECTED + timedelta(microseconds=run + 1)  # each request its own failure time
            return AttributionRequest(
                workload_id=WORKLOAD,
                scope=Scope(nodes=names, ranks=tuple(range(args.nodes * RANKS_PER_NODE))),
                failure_context=FailureContext(detected_at=detected, detection_signal="application_error"),
                timeout_ms=args.timeout_ms,
                workload_context=WorkloadContext(workflow_id="bench", attempt_index=0),
                phase=Phase.FAST,
            )

        if args.warm_stub:
            _get(url + "/reset")
            started = time.perf_counter()
            TelemetryProvider.from_options(options).fast(request_of(-1), Deadline.after_ms(args.timeout_ms), None)
            stats = _get(url + "/stats")
            print(f"the stub warmed by another provider's request (untimed: {time.perf_counter() - started:.2f} s, "
                  f"{stats['late']} queries answered after the stub's delay)")
        for run in range(max(1, args.repeat)):
            request = request_of(run)
            _get(url + "/reset")
            started, cpu, stub_cpu = time.perf_counter(), time.process_time(), _cpu_s(child.pid)
            outcome = provider.fast(request, Deadline.after_ms(args.timeout_ms), None)
            wall = time.perf_counter() - started
            cpu, stub_cpu = time.process_time() - cpu, _cpu_s(child.pid) - stub_cpu
            stats = _get(url + "/stats")
            named = [(getattr(f.target, "name", "job"), f.error_category) for f in outcome.attributions]
            error = outcome.error.type.value if outcome.error else "none"
            print(
                f"run {run + 1}: answer in {wall:.2f} s (CPU: {cpu:.2f} s here, {stub_cpu:.2f} s the stub's), "
                f"{stats['queries']} queries, "
                f"{stats['bytes'] / 2**20:.1f} MiB of JSON read, at most {stats['most_in_flight']} in flight, "
                f"{stats['late']} answered after the stub's delay ({stats['late_s']:.2f} s late in all), "
                f"culprit {culprit} named: {(culprit, 'collective_hang') in named} (findings {named[:3]}, "
                f"error {error}: {outcome.error.message[:300] if outcome.error else ''})"
            )
        parse_s, rules_s, lines = parser_alone(args.nodes, args.silent_node)
        print(f"the job-log parser alone on the {lines} lines of the failure (what the filter sends), Loki's times in "
              f"front: {parse_s:.2f} s; the job-log rules on what it found: {rules_s:.2f} s")
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


if __name__ == "__main__":
    main()
