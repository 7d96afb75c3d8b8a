"""Benchmark: a provider that waits 200 ms, as concurrency grows, under gunicorn with the project's config.

The Adapter runs `ATTRIBUTION_PROVIDER=tests.fakes:from_options` with `ATTRIBUTION_FAKE_DELAY_MS=200`, 2 gthread
workers x 8 threads (127.0.0.1, free port). For each client count: throughput, p50, p99, the `error.type`
answers (timeouts) and requests without an HTTP answer. Throughput should rise until clients = workers x threads
(16), then level off at about 16 / 0.2 s = 80 req/s while latency grows with the queue.

    .venv/bin/python bench/concurrency.py [--levels 1,2,4,8,16,32,64] [--seconds 8] [--timeout-ms 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import request_body, run_load, start_adapter  # noqa: E402
from tests.fakes import FAKE_PROVIDER  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,2,4,8,16,32,64")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--timeout-ms", type=int, default=2000, help="the requests' timeout_ms")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    levels = [int(x) for x in args.levels.split(",")]
    body = json.dumps(request_body(["worker-01"], [0], timeout_ms=args.timeout_ms)).encode()
    logs = Path(tempfile.mkdtemp(prefix="bench-concurrency-"))
    server = start_adapter(
        {"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_FAKE_DELAY_MS": "200"},
        logs / "adapter.log",
        workers=args.workers,
        threads=args.threads,
    )
    print(f"saturation expected at {args.workers * args.threads} clients (workers x threads)")
    try:
        for clients in levels:
            result = run_load(server.port, body, clients, args.seconds)
            print(f"{clients:3d} clients {result.line()}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
