"""Benchmark: the Adapter's per-request overhead in process (Flask test client, a provider that answers at once).

Two requests: one node, and a maximal one (16384 nodes with names padded so the body sits just under the 4 MiB
limit, 262144 ranks). Prints mean/p50/p99 over N iterations, and the share spent in JSON parsing + schema
validation (`AttributionRequestSchema.load`) measured separately on the same body.

    .venv/bin/python bench/overhead.py [--iterations 2000] [--max-iterations 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import create_app  # noqa: E402
from app.attribution import _request_schema  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench._servers import request_body, summarize  # noqa: E402
from tests.fakes import FakeProvider  # noqa: E402

LIMIT = 4 * 1024 * 1024
MAX_NODES, MAX_RANKS = 16384, 262144


def maximal_body() -> bytes:
    ranks = list(range(MAX_RANKS))
    base = len(json.dumps(request_body([f"n{i:05d}-" for i in range(MAX_NODES)], ranks)).encode())
    pad = min(253 - 7, (LIMIT - 4096 - base) // MAX_NODES)  # keep 4 KiB below the limit
    nodes = [f"n{i:05d}-" + "x" * pad for i in range(MAX_NODES)]
    return json.dumps(request_body(nodes, ranks)).encode()


def measure(client, body: bytes, iterations: int) -> tuple[list[float], list[float], int]:
    totals, validation = [], []
    response_size = 0
    for _ in range(iterations):
        started = time.perf_counter()
        response = client.post("/v1/attribution", data=body, content_type="application/json")
        totals.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
        response_size = len(response.get_data())
        started = time.perf_counter()
        _request_schema.load(json.loads(body))
        validation.append((time.perf_counter() - started) * 1000)
    return totals, validation, response_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000, help="iterations of the one-node request")
    parser.add_argument("--max-iterations", type=int, default=20, help="iterations of the maximal request")
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))

    provider = FakeProvider()  # no delay: one finding on the first node, the other nodes unattributed
    app = create_app(Settings(provider="fake", log_level="warning"), provider=provider)
    client = app.test_client()
    small = json.dumps(request_body(["worker-01"], [0])).encode()
    big = maximal_body()
    assert len(big) <= LIMIT, len(big)
    for name, body, n in (("one node", small, args.iterations), ("maximal", big, args.max_iterations)):
        measure(client, body, min(n, 5))  # warm-up
        totals, validation, size = measure(client, body, n)
        share = sum(validation) / sum(totals)
        print(f"{name:9s} body {len(body):>9,d} B, answer {size:>9,d} B")
        print(f"  whole request      {summarize(totals)}")
        print(f"  parse + validation {summarize(validation)}  ({share:.0%} of the request)")


if __name__ == "__main__":
    main()
