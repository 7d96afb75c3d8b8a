"""`check` for the job-log signal: the job-log tree `<dir>/<workload_id>/<attempt_index>/<node>.log*`, as read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from providers.telemetry.checking import ERROR, MAX_HOSTS_LISTED, MAX_SKIPPED_LISTED, WARNING, Checker
from providers.telemetry.joblog.files import parse_file_name
from providers.telemetry.reading import entry_kind, list_folder, newest_first

#: workload folders of the job-log directory looked at (the newest first, by modification time)
MAX_WORKLOADS_LISTED = 16


def check_job_logs(c: Checker, root: Path) -> dict[str, Any]:
    """The job-log tree `<dir>/<workload_id>/<attempt_index>/<node>.log*`: readable, laid out, files per attempt."""
    details: dict[str, Any] = {"dir": str(root), "workloads": [], "workloads_not_listed": 0, "skipped": []}
    c.say(f"job logs: {root}")
    entries = c.folder(root, "job-log directory")
    if entries is None:
        return details
    workloads = []
    for entry in entries:
        kind = entry_kind(entry)
        if kind == "dir":
            workloads.append(entry)
        else:
            reason = kind if kind != "file" else "a file, not a workload folder"
            details["skipped"].append({"path": entry.name, "reason": reason})

    workloads = newest_first(workloads)
    for entry in workloads[:MAX_WORKLOADS_LISTED]:
        if c.expired(f"{entry.name}/"):
            break
        try:
            attempts = list_folder(Path(entry.path))
        except OSError as exc:
            c.problem(ERROR, f"{entry.name}/", f"the workload's job-log folder cannot be read ({exc.strerror})")
            continue
        for attempt in attempts:
            where = f"{entry.name}/{attempt.name}"
            if entry_kind(attempt) != "dir" or not attempt.name.isascii() or not attempt.name.isdigit():
                details["skipped"].append({"path": where, "reason": "not an attempt folder (<attempt_index>/)"})
                continue
            try:
                files = list_folder(Path(attempt.path))
            except OSError as exc:
                c.problem(ERROR, f"{where}/", f"the attempt's job-log folder cannot be read ({exc.strerror})")
                continue
            nodes: set[str] = set()
            count = 0
            for f in files:
                parsed = parse_file_name(f.name)
                if parsed is None or entry_kind(f) != "file":
                    details["skipped"].append({"path": f"{where}/{f.name}", "reason": "not <node>.log[.N][.gz]"})
                    continue
                nodes.add(parsed[0])
                count += 1
            details["workloads"].append(
                {"workload_id": entry.name, "attempt_index": int(attempt.name), "files": count, "nodes": sorted(nodes)}
            )
            listed = ", ".join(sorted(nodes)[:MAX_HOSTS_LISTED]) + (" ..." if len(nodes) > MAX_HOSTS_LISTED else "")
            c.say(f"  workload {entry.name} attempt {attempt.name}: {count} file(s) of {len(nodes)} node(s)"
                          + (f" ({listed})" if nodes else ""))
            if not nodes:
                c.problem(WARNING, f"{where}/", "holds no <node>.log file, so this attempt's job logs are empty")
    details["workloads_not_listed"] = max(0, len(workloads) - MAX_WORKLOADS_LISTED)
    if details["workloads_not_listed"]:
        c.say(f"  ... and {details['workloads_not_listed']} more workload folder(s), not read")
    for item in details["skipped"][:MAX_SKIPPED_LISTED]:
        c.problem(
            WARNING, item["path"],
            f"is not read as a job log ({item['reason']}); the layout is "
            "<dir>/<workload_id>/<attempt_index>/<node>.log",
        )
    if not workloads:
        c.problem(WARNING, str(root), "holds no workload folder yet, so fast answers use kernel logs only")
    return details


