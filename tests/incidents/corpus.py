"""The incident corpus: real multi-node and multi-GPU training incidents from public reports, each answered through
the service as a caller would (POST /v1/attribution `fast` on a files tree built from the case's logs, and from its
kernel lines where the report quotes a node's kernel log: they reach the service through its kernel-log tree).

`python -m tests.incidents.corpus` prints, for the whole corpus, how many cases are answered as their report says,
the node findings a report contradicts (the goal is 0), the known misses with their reasons, and for each signal of
the job-log signal table how many cases it decided.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from providers.telemetry.joblog import conclude
from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.kernel.parse import parse_line

CASES = Path(__file__).resolve().parent / "cases"


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    nodes: list[str]
    ranks: list[int]
    logs: dict[str, list[str]]  # nodes with a log file (possibly empty); nodes without one are absent
    expected: dict[str, str]
    known_miss: str | None
    #: per node, the kernel messages the report quotes (`kernel/<node>.log`, in whatever format it was posted)
    kernel: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    body: dict[str, Any]
    findings: list[tuple[str, str]]  # (node or AllJobResources, category)
    decided_by: tuple[str, ...]  # the signal table ids that decided the answer ("silence" when nothing was understood)


def cases() -> list[Case]:
    out = []
    for folder in sorted(p for p in CASES.iterdir() if p.is_dir()):
        meta = json.loads((folder / "case.json").read_text())
        logs = {p.stem: p.read_text().splitlines() for p in sorted((folder / "logs").glob("*.log"))}
        kernel = {node: _messages((folder / path).read_text().splitlines())
                  for node, path in meta.get("kernel", {}).items()}  # fmt: skip
        out.append(Case(meta["id"], meta["source"], meta["nodes"], meta["ranks"], logs, meta["expected"],
                        meta.get("known_miss"), kernel))
    return out


def _messages(lines: list[str]) -> list[str]:
    """The kernel messages of a report's lines, without the time and host the report printed (the corpus places them
    in the request's window; their order and text are kept). A line no known format reads is kept whole."""
    out = []
    for line in lines:
        parsed = parse_line(line.rstrip())
        out.append(parsed.message if parsed is not None else line.strip())
    return out


def answer(case: Case, root: Path) -> Answer:
    """The service's answer to the case, and the signals behind it."""
    from tests.telemetry.conftest import rsyslog
    from tests.telemetry.test_job_logs_app import DETECTED, _ask, _findings

    # The report's kernel messages as the node's kernel log writes them, a second apart, ending before detection.
    kernel = {
        node: [rsyslog(DETECTED - timedelta(seconds=len(messages) + 5 - i), node, m) for i, m in enumerate(messages)]
        for node, messages in case.kernel.items()
    }
    body = _ask(root, case.nodes, case.logs or {case.nodes[0]: []}, ranks=case.ranks, kernel=kernel)
    resolve = exact_resolver(case.nodes)
    parsed = {node: parse_lines(node, lines, resolve) for node, lines in case.logs.items()}
    concluded = conclude(case.nodes, case.ranks, parsed)
    findings = _findings(body)
    if findings:
        decided = concluded.decided_by
    elif concluded.noted:
        decided = concluded.noted
    else:
        decided = ("silence",) if concluded.silence else ()
    return Answer(body, findings, tuple(decided))


def expected_findings(case: Case) -> list[tuple[str, str]]:
    target = case.expected["target"]
    if target == "none":
        return []
    return [(target, case.expected["category"])]


def contradicted(case: Case, result: Answer) -> list[str]:
    """The node findings of the answer that the case's report contradicts (a node other than the one it names)."""
    target = case.expected["target"]
    return [name for name, _ in result.findings if name != "AllJobResources" and name != target]


def as_the_report_says(case: Case, result: Answer) -> bool:
    if result.findings != expected_findings(case):
        return False
    # No finding must come with a note: the caller can tell "nothing to say" from "not understood".
    return bool(result.findings) or "error" in result.body


def main() -> None:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, case in enumerate(cases()):
            results.append((case, answer(case, Path(tmp) / str(n))))
    answered = [c for c, r in results if as_the_report_says(c, r)]
    wrong_nodes = [(c.id, contradicted(c, r)) for c, r in results if contradicted(c, r)]
    no_node = [c for c, _ in results if c.expected["target"] in ("none", "AllJobResources")]
    decided: Counter[str] = Counter(s for c, r in results if as_the_report_says(c, r) for s in r.decided_by)
    print(f"cases: {len(results)} (name no node: {len(no_node)})")
    print(f"answered as the report says: {len(answered)} of {len(results)}")
    print(f"node findings the reports contradict: {sum(len(n) for _, n in wrong_nodes)} {wrong_nodes or ''}")
    for case, result in results:
        if not as_the_report_says(case, result):
            print(f"  not as the report says: {case.id}: {result.findings or 'no finding'}; {case.known_miss}")
    print("cases decided, per signal:")
    for signal, count in sorted(decided.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {signal}: {count}")


if __name__ == "__main__":
    main()
