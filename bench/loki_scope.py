"""Benchmark: the telemetry `loki` source at full scope against a stub Loki that answers each query after 50 ms.

Prints, for a 16,384-node and a 1,024-node fast request run in process: the number of queries, the longest query
URL, the most queries in flight at once and the wall time (the median of `--repeat` runs, and the slowest). The goal
for 16,384 nodes is an answer within 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.loki_stub import StubLoki  # noqa: E402 - after the path tweak that lets the script run from anywhere
from providers.base import (  # noqa: E402
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.telemetry import TelemetryProvider  # noqa: E402

DETECTED = datetime(2026, 9, 9, 12, tzinfo=UTC)


def request(nodes: list[str]) -> AttributionRequest:
    return AttributionRequest(
        workload_id="bench",
        scope=Scope(nodes=tuple(nodes), ranks=()),
        failure_context=FailureContext(detected_at=DETECTED, detection_signal="application_error"),
        timeout_ms=10000,
        workload_context=WorkloadContext(workflow_id="bench", attempt_index=0),
        phase=Phase.FAST,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=int, default=50, help="the stub's delay before each answer")
    parser.add_argument("--concurrency", default="8", help="ATTRIBUTION_LOKI_CONCURRENCY")
    parser.add_argument("--timeout-ms", type=int, default=10000, help="the request's deadline")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each request (the median is printed)")
    args = parser.parse_args()
    at_ns = int((DETECTED - timedelta(minutes=2)).timestamp()) * 1_000_000_000
    names = {
        "short": lambda i: f"gpu{i:05d}",
        "fqdn": lambda i: f"gpu-node-{i:05d}.rack-{i // 64:03d}.cluster.example.internal",
    }
    with StubLoki(args.delay_ms / 1000, xid_hosts=(names["fqdn"](7), names["short"](7)), at_ns=at_ns) as loki:
        provider = TelemetryProvider.from_options(
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": loki.url,
                "ATTRIBUTION_LOKI_CONCURRENCY": args.concurrency,
            }
        )
        print(f"stub Loki at {loki.url}, {args.delay_ms} ms per query, concurrency {args.concurrency}")
        for count in (16384, 1024):
            for kind, make in names.items():
                nodes = [make(i) for i in range(count)]
                walls = []
                for _ in range(max(1, args.repeat)):
                    loki.reset()
                    started = time.perf_counter()
                    outcome = provider.fast(request(nodes), Deadline.after_ms(args.timeout_ms), None)
                    walls.append(time.perf_counter() - started)
                findings = [getattr(f.target, "name", "job") for f in outcome.attributions]
                error = outcome.error.type.value if outcome.error else "none"
                print(
                    f"{count:>6} nodes ({kind:>5} names): {len(loki.url_lengths):>4} queries, longest URL "
                    f"{max(loki.url_lengths)} bytes, at most {loki.most_in_flight} in flight, wall "
                    f"{statistics.median(walls):.3f} s (median of {len(walls)}, slowest {max(walls):.3f} s), "
                    f"findings {findings}, error {error}"
                )


if __name__ == "__main__":
    main()
