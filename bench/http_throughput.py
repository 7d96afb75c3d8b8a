"""Benchmark: the Adapter under gunicorn versus a bare Flask JSON endpoint under the same gunicorn settings.

Both run 2 gthread workers x 8 threads on 127.0.0.1 (free ports): the Adapter with its own config and the instant
fake provider (`tests.fakes:from_options`, no delay), the bare app (bench/bare_app.py) with the same flags. The
load generator is a Python thread pool (keep-alive connections) in this process, so on a small machine it
competes with the servers for CPU: compare the two lines, not the absolute figures.

    .venv/bin/python bench/http_throughput.py [--clients 16] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import request_body, run_load, start_adapter, start_bare  # noqa: E402
from tests.fakes import FAKE_PROVIDER  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    body = json.dumps(request_body(["worker-01"], [0])).encode()
    logs = Path(tempfile.mkdtemp(prefix="bench-http-"))
    results = {}
    for name in ("bare", "adapter"):
        if name == "bare":
            server = start_bare(logs / "bare.log")
        else:
            server = start_adapter(
                {"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_FAKE_DELAY_MS": "0"},
                logs / "adapter.log",
            )
        try:
            results[name] = run_load(server.port, body, args.clients, args.seconds)
        finally:
            server.stop()
        print(f"{name:8s} {results[name].line()}")
    bare, adapter = results["bare"], results["adapter"]
    print(
        f"adapter/bare: throughput {adapter.rate / bare.rate:.2f}x, p50 {adapter.pct(50) / bare.pct(50):.2f}x, "
        f"p99 {adapter.pct(99) / bare.pct(99):.2f}x   (server logs in {logs})"
    )


if __name__ == "__main__":
    main()
