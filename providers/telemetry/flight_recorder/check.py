"""`check` for the flight-recorder signal: `<dir>/<workload_id>/<attempt_index>/<node>/<dumps>`, read as a request
reads them (the same reader, the same bounds): per node the dumps found, their format versions, ranks, the time span
of their entries, and the files that could not be read."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from providers.base import Deadline
from providers.telemetry.checking import ERROR, MAX_HOSTS_LISTED, WARNING, Checker, stamp
from providers.telemetry.digits import is_number
from providers.telemetry.flight_recorder.dumps import span
from providers.telemetry.flight_recorder.source import read_dumps
from providers.telemetry.reading import entry_kind, list_folder, newest_first

#: workload folders looked at (the newest first, by modification time), attempts per workload
MAX_WORKLOADS_LISTED = 16
MAX_ATTEMPTS_LISTED = 4


def _time(ns: int | None) -> str | None:
    if ns is None or not 0 < ns < 253402300800 * 10**9:
        return None
    return stamp(datetime.fromtimestamp(ns / 1e9, UTC))


def check_flight_recorder(c: Checker, root: Path) -> dict[str, Any]:
    """The dump tree: readable, laid out, and per attempt and node what a request would read."""
    details: dict[str, Any] = {"dir": str(root), "attempts": [], "workloads_not_listed": 0, "skipped": []}
    c.say(f"flight-recorder dumps: {root}")
    entries = c.folder(root, "flight-recorder directory")
    if entries is None:
        return details
    workloads = [e for e in entries if entry_kind(e) == "dir"]
    details["skipped"] = [{"path": e.name, "reason": "not a workload folder"} for e in entries if e not in workloads]

    workloads = newest_first(workloads)
    for entry in workloads[:MAX_WORKLOADS_LISTED]:
        if c.expired(f"{entry.name}/"):
            break
        try:
            attempts = [a for a in list_folder(Path(entry.path)) if entry_kind(a) == "dir" and is_number(a.name, 9)]
        except OSError as exc:
            c.problem(ERROR, f"{entry.name}/", f"the workload's dump folder cannot be read ({exc.strerror})")
            continue
        for attempt in sorted(attempts, key=lambda a: -int(a.name))[:MAX_ATTEMPTS_LISTED]:
            details["attempts"].append(_attempt(c, entry.name, attempt))
    details["workloads_not_listed"] = max(0, len(workloads) - MAX_WORKLOADS_LISTED)
    if details["workloads_not_listed"]:
        c.say(f"  ... and {details['workloads_not_listed']} more workload folder(s), not read")
    for item in details["skipped"]:
        c.problem(WARNING, item["path"], "is not read: the layout is <dir>/<workload_id>/<attempt_index>/<node>/")
    return details


def _attempt(c: Checker, workload: str, attempt: os.DirEntry[str]) -> dict[str, Any]:
    where = f"{workload}/{attempt.name}"
    read = read_dumps(Path(attempt.path), Deadline(c.deadline.expires_at))
    nodes: dict[str, dict[str, Any]] = {}
    for node, count in sorted(read.folders.items()):
        ranks = sorted(r for r, n in read.node_of.items() if n == node)
        dumps = [read.dumps[r] for r in ranks]
        times = [t for d in dumps if d.span for t in d.span]
        nodes[node] = {
            "dumps": count,
            "ranks": ranks,
            "versions": sorted({d.version for d in dumps}),
            "formats": sorted({d.form for d in dumps}),
            "first_entry": _time(min(times)) if times else None,
            "last_entry": _time(max(times)) if times else None,
            "unreadable": [u for u in read.unreadable if u.startswith(f"{node}/")],
        }
    c.say(f"  workload {workload} attempt {attempt.name}: {len(read.dumps)} dump(s) of {len(nodes)} node(s)")
    for node, item in list(nodes.items())[:MAX_HOSTS_LISTED]:
        when = f", entries {item['first_entry']} .. {item['last_entry']}" if item["first_entry"] else ""
        versions = ", ".join(item["versions"]) or "none"
        ranks = span(tuple(item["ranks"])) if item["ranks"] else "none"
        c.detail(f"    {node}: {item['dumps']} dump(s), ranks {ranks}, version {versions}{when}")
    if len(nodes) > MAX_HOSTS_LISTED:
        c.detail(f"    ... and {len(nodes) - MAX_HOSTS_LISTED} more node(s)")
    for text in read.unreadable:
        c.problem(WARNING, f"{where}/{text.split(' ', 1)[0]}", text.split(" ", 1)[1] if " " in text else text)
    if read.late:
        c.problem(ERROR, f"{where}/", f"{len(read.late)} node folder(s) were not read before the check's deadline")
    return {"workload_id": workload, "attempt_index": int(attempt.name), "nodes": nodes}
