"""The catalogues' coverage by real incidents: per catalogue, how many of its rows a case of the incident corpus shows.

`python -m tests.joblog.coverage` parses every case's logs (`tests/incidents/cases/`) with the node parser and counts,
for each file and catalogue of the signal table, its rows, the rows the reader looks for, and the rows some case's
lines were read as (a line's row, the row of the format it matched, the row of the code it carries, the CUDA code a
CUDA error names, the line that printed it), with how many cases showed each. Real incidents check a catalogue; they
never write it: a row no case shows is as much a row as one many do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.messages import matcher
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.records import ExceptionKind, NodeLog
from providers.telemetry.joblog.signals import CUDA_CONTEXT, SIGNALS, Signal
from tests.incidents.corpus import cases

#: the structural records and the rows that stand for them
_STRUCTURAL = {
    "timeouts": "torch_watchdog_timeout",
    "progress": "torch_watchdog_progress",
    "desync": "torch_desync_report",
}


@dataclass(frozen=True)
class Coverage:
    """One catalogue's rows, those the reader looks for, and those the corpus shows (row id -> cases)."""

    origin: str
    catalogue: str
    rows: int
    searched: int
    shown: dict[str, int]


def shown_rows(log: NodeLog) -> set[str]:
    """The rows a node's parsed log was read as."""
    ids: set[str] = set()
    for hit in log.signals:
        ids.update(x for x in (hit.signal, hit.format, hit.code) if x)
    for err in log.network:
        ids.update(x for x in (err.kind.value, err.signal, err.format, err.code) if x)
    for cuda in log.cuda:
        ids.add(cuda.kind.runtime_name if cuda.kind is not None else "cuda_error_unlisted")
        ids.update(_cuda_lines(cuda.line.text))
    for field, row in _STRUCTURAL.items():
        if getattr(log, field):
            ids.add(row)
    if any(f.root for f in log.failures):
        ids.add("torchelastic_root_cause")
    if any(t.kind is ExceptionKind.APPLICATION for t in log.tracebacks):
        ids.add("python_application_exception")
    return ids


def _cuda_lines(text: str) -> set[str]:
    """The rows of the lines that print a CUDA error which a CUDA error's line was printed by: the row whose format
    matches it (the row's marker alone, for a row without a format)."""
    rows = [s for s in SIGNALS if s.parse == "cuda" and s.catalogue not in ("cudaError_t", "CUresult")
            and any(m in text for m in s.markers if m in CUDA_CONTEXT)]
    matched = {s.id for s in rows if s.format and matcher(s.id).regex.search(text)}
    return matched or {s.id for s in rows if not s.format}


def coverage() -> list[Coverage]:
    """Every catalogue of the table, in the table's order, with what the corpus shows of it."""
    per_case: Counter[str] = Counter()
    for case in cases():
        resolve = exact_resolver(case.nodes)
        seen: set[str] = set()
        for node, node_lines in case.logs.items():
            seen |= shown_rows(parse_lines(node, node_lines, resolve))
        per_case.update(seen)
    groups: dict[tuple[str, str], list[Signal]] = {}
    for row in SIGNALS:
        groups.setdefault((row.origin, row.catalogue or "structural"), []).append(row)
    return [
        Coverage(origin, catalogue, len(rows), sum(1 for r in rows if r.searched),
                 {r.id: per_case[r.id] for r in rows if per_case[r.id]})
        for (origin, catalogue), rows in groups.items()
    ]


def main() -> None:
    report = coverage()
    total = sum(c.rows for c in report)
    shown = sum(len(c.shown) for c in report)
    print(f"{len(cases())} cases; {shown} of {total} rows shown by at least one case")
    print(f"{'file':<14} {'catalogue':<16} {'rows':>5} {'looked for':>10} {'shown':>6}")
    for c in report:
        print(f"{c.origin:<14} {c.catalogue:<16} {c.rows:>5} {c.searched:>10} {len(c.shown):>6}")
    print("rows shown, with the number of cases that show each:")
    for c in report:
        if c.shown:
            listed = ", ".join(f"{row} {n}" for row, n in sorted(c.shown.items(), key=lambda kv: (-kv[1], kv[0])))
            print(f"  {c.origin} {c.catalogue}: {listed}")


if __name__ == "__main__":
    main()
