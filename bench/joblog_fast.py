"""Benchmark: one `fast` request through the Flask test client for a 1,024-node job with job logs and kernel logs.

The job logs are bench/joblog_scan.py's tree (every node's `<node>.log` 64 MiB long: a sparse head and a real-text
tail with eight ranks' training lines, then every rank's watchdog timeout and torchelastic's summary; one node's
ranks fall silent). Each node also has a small kernel log with a few ordinary kernel lines around the failure. The
request names every node and every rank; it runs in a child process, which reports the request's wall and CPU time
and its peak RSS. The temporary folder is removed afterwards.

    python bench/joblog_fast.py [--nodes 1024] [--file-mib 64] [--tail-mib 1] [--silent-node 537]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import create_app  # noqa: E402 - after the path tweak that lets the script run from anywhere
from app.settings import Settings  # noqa: E402
from bench.joblog_scan import RANKS_PER_NODE, WORKLOAD, generate, node_name  # noqa: E402
from providers.telemetry import TelemetryProvider  # noqa: E402
from providers.telemetry.joblog import MAX_NODE_BYTES, MAX_REQUEST_BYTES  # noqa: E402

MIB = 1024 * 1024
DETECTED = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)


def kernel_logs(root: Path, nodes: int) -> None:
    """A small RSYSLOG_FileFormat kernel log per node: ordinary lines in and around the `fast` window."""
    folder = root / "kernel"
    folder.mkdir()
    for n in range(nodes):
        host = node_name(n)
        lines = []
        for minutes in range(-30, 10, 2):
            t = DETECTED + timedelta(minutes=minutes)
            lines.append(f"{t.strftime('%Y-%m-%dT%H:%M:%S.%f')}+00:00 {host} kernel: mlx5_core 0000:0c:00.0: "
                         "mlx5_fw_tracer_handle_traces:751:(pid 1824): FW tracer rotated log buffer")
        (folder / f"{host}.log").write_text("\n".join(lines) + "\n")


def request(root: Path, nodes: int) -> dict[str, object]:
    """The measured part, in its own process: one POST /v1/attribution fast."""
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel"),
        "ATTRIBUTION_JOB_LOG_DIR": str(root),
    })
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = {
        "schema_version": "0.1.0",
        "workload_id": WORKLOAD,
        "scope": {"nodes": [node_name(i) for i in range(nodes)], "ranks": list(range(nodes * RANKS_PER_NODE))},
        "failure_context": {"detected_at": DETECTED.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "detection_signal": "application_error"},
        "timeout_ms": 300_000,
        "workload_context": {"workflow_id": "bench", "attempt_index": 0},
        "phase": "fast",
    }
    cpu_start = time.process_time()
    start = time.perf_counter()
    answer = client.post("/v1/attribution", json=body)
    seconds = time.perf_counter() - start
    data = answer.get_json()
    return {
        "status": answer.status_code,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(time.process_time() - cpu_start, 2),
        "findings": [(f["target"].get("name", f["target"]["type"]), f["error_category"]) for f in data["attributions"]],
        "unattributed": len(data["unattributed_targets"]),
        "error": data.get("error", {}).get("type"),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--file-mib", type=int, default=64)
    parser.add_argument("--tail-mib", type=float, default=1.0, help="real text at the end of each job-log file")
    parser.add_argument("--silent-node", type=int, default=537)
    parser.add_argument("--request", metavar="DIR", help=argparse.SUPPRESS)  # the child's entry
    args = parser.parse_args()
    if args.request:
        print(json.dumps(request(Path(args.request), args.nodes)))
        return
    share = min(MAX_NODE_BYTES, MAX_REQUEST_BYTES // args.nodes)
    tail_bytes = max(int(args.tail_mib * MIB), 2 * share)  # every byte the reader takes is real text
    root = Path(tempfile.mkdtemp(prefix="joblog-fast-bench-"))
    try:
        start = time.perf_counter()
        written = generate(root, args.nodes, args.file_mib * MIB, tail_bytes, args.silent_node)
        kernel_logs(root, args.nodes)
        generated = time.perf_counter() - start
        child = subprocess.run(
            [sys.executable, __file__, "--request", str(root), "--nodes", str(args.nodes)],
            check=True, capture_output=True, text=True,
        )
        figures = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"job logs: {args.nodes} nodes x {args.file_mib} MiB = {args.nodes * args.file_mib / 1024:.0f} GiB of files "
          f"({written / MIB:.0f} MiB real text at their ends, the rest sparse), plus a kernel log per node; "
          f"generated in {generated:.1f} s")
    print(f"bounds: {MAX_NODE_BYTES // 1024} KiB per node, {MAX_REQUEST_BYTES // MIB} MiB per request "
          f"-> {share // 1024} KiB per node here")
    print(f"one fast request (Flask test client): HTTP {figures['status']}, {figures['seconds']} s wall, "
          f"{figures['cpu_seconds']} s CPU, peak RSS {figures['peak_rss_mib']} MiB")
    print(f"answer: findings {figures['findings']}, {figures['unattributed']} unattributed, error {figures['error']}")


if __name__ == "__main__":
    main()
