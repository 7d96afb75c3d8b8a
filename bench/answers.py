"""Answers of the open provider on the samples and on generated trees, printed one JSON line per request.

Not a timing: the output of two checkouts is compared byte for byte to show that a change of layout changed no
answer (`diff <(python bench/answers.py) <(cd ../other && python bench/answers.py)`). Every request is built from
fixed data (the shipped samples, and trees written by bench/kernel_scan.py's and bench/joblog_scan.py's
generators with fixed seeds into a temporary folder that is removed afterwards); findings, unattributed targets
and the error are printed as the provider returned them, in order. The last line is the SHA-256 of all others.

    python bench/answers.py
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.joblog_fast import kernel_logs  # noqa: E402 - after the path tweak that lets the script run from anywhere
from bench.joblog_scan import RANKS_PER_NODE, WORKLOAD, node_name  # noqa: E402
from bench.joblog_scan import generate as generate_job_logs  # noqa: E402
from bench.kernel_scan import DETECTED as SCAN_DETECTED  # noqa: E402
from bench.kernel_scan import generate as generate_kernel_logs  # noqa: E402
from providers.base import (  # noqa: E402
    AttributionOutcome,
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.telemetry import TelemetryProvider  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "conf" / "samples"
SEED_TIME = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)


def _request(
    workload: str, nodes: list[str], at: datetime, ranks: tuple[int, ...] = (), phase: Phase = Phase.FAST,
    start: datetime | None = None, end: datetime | None = None,
) -> AttributionRequest:
    return AttributionRequest(
        workload_id=workload,
        scope=Scope(nodes=tuple(nodes), ranks=ranks, start_time=start, end_time=end),
        failure_context=FailureContext(detected_at=at, detection_signal="application_error"),
        timeout_ms=300000,
        workload_context=WorkloadContext(workflow_id="answers", attempt_index=0),
        phase=phase,
    )


def _plain(outcome: AttributionOutcome) -> dict[str, object]:
    def stamp(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "attributions": [
            {
                "target": repr(f.target),
                "category": f.error_category,
                "observed_at": stamp(f.observed_at),
                "confidence": f.confidence,
                "evidence": [[e.source, e.message, stamp(e.observed_at)] for e in f.evidence],
            }
            for f in outcome.attributions
        ],
        "unattributed": [repr(t) for t in outcome.unattributed_targets],
        "error": None if outcome.error is None else [outcome.error.type.value, outcome.error.message],
    }


def _answer(label: str, provider: TelemetryProvider, request: AttributionRequest) -> str:
    deadline = Deadline.after_ms(600_000)
    if request.phase is Phase.SLOW:
        outcome = provider.slow(request, {"v": 1}, deadline, None)
    else:
        outcome = provider.fast(request, deadline, None)
    return json.dumps({"case": label, **_plain(outcome)}, sort_keys=True, ensure_ascii=False)


def _sample_lines() -> Iterator[str]:
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
        "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
        "ATTRIBUTION_JOB_LOG_DIR": str(SAMPLES / "job-logs"),
    })
    workers = [f"worker-{n:02d}" for n in range(1, 13)]
    for workload in ("12345", "67890", "67891", "none"):
        for nodes in (["worker-01"], workers[:6], workers, ["worker-07", "worker-08"], ["worker-12"], []):
            for minutes in (-20, 0, 30):
                at = SEED_TIME + timedelta(minutes=minutes)
                yield _answer(f"samples {workload} {len(nodes)} {minutes}", provider, _request(workload, nodes, at))
        yield _answer(f"samples {workload} ranks", provider, _request(workload, workers, SEED_TIME, ranks=(0, 5, 9)))
    for start_h, end_h in ((8, 12.5), (12, 12.4), (12.1, 13)):
        start = SEED_TIME.replace(hour=0) + timedelta(hours=start_h)
        end = SEED_TIME.replace(hour=0) + timedelta(hours=end_h)
        request = _request("12345", workers[:4], SEED_TIME, phase=Phase.SLOW, start=start, end=end)
        yield _answer(f"samples slow {start_h}-{end_h}", provider, request)


def _generated_lines(tmp: Path) -> Iterator[str]:
    for combined in (False, True):
        root = tmp / f"kernel-{combined}"
        root.mkdir()
        generate_kernel_logs(root, 32, 8 * 1024 * 1024, seed=7, quiet=False, combined=combined)
        provider = TelemetryProvider.from_options({"ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
                                                   "ATTRIBUTION_KERNEL_LOG_DIR": str(root)})
        hosts = [f"worker-{n:03d}" for n in range(32)]
        for minutes in (-300, -30, 0, 1, 45):
            at = SCAN_DETECTED + timedelta(minutes=minutes)
            for nodes in (hosts, hosts[:8], hosts[3:5]):
                label = f"generated kernel combined={combined} {len(nodes)} {minutes}"
                yield _answer(label, provider, _request("bench", nodes, at))
    jobs = tmp / "jobs"
    jobs.mkdir()
    generate_job_logs(jobs, 16, 2 * 1024 * 1024, 256 * 1024, silent=5)
    kernel_logs(jobs, 16)
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(jobs / "kernel"),
        "ATTRIBUTION_JOB_LOG_DIR": str(jobs),
    })
    names = [node_name(n) for n in range(16)]
    for ranks in ((), tuple(range(16 * RANKS_PER_NODE)), (3, 40, 41)):
        for nodes in (names, names[:4], names[4:6]):
            yield _answer(f"generated jobs {len(nodes)} ranks={len(ranks)}", provider,
                          _request(WORKLOAD, nodes, SEED_TIME, ranks=ranks))


def main() -> None:
    digest = hashlib.sha256()
    tmp = Path(tempfile.mkdtemp(prefix="answers-"))
    try:
        for line in (*_sample_lines(), *_generated_lines(tmp)):
            digest.update(line.encode() + b"\n")
            print(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"sha256": digest.hexdigest()}))


if __name__ == "__main__":
    main()
