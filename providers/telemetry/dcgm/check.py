"""`check` for the DCGM signal: what the epilog directory holds per node, read the way the epilog reader reads it."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from providers.telemetry.checking import ERROR, MAX_FILES_PER_HOST, WARNING, Checker, stamp, tally
from providers.telemetry.dcgm import results as epilog
from providers.telemetry.reading import NotRegular, entry_kind, list_folder, nested_holds_anything, open_regular


def epilog_node(stem: str) -> str:
    """The node part of a top-level result's name: `<node>` or `<node>-<stamp>` (epilog's layout)."""
    for width, marker_at, marker in ((16, 8, "T"), (20, 4, "-")):
        tail = stem[-width:]
        if (
            len(stem) > width + 1
            and stem[-width - 1] == "-"
            and tail[marker_at].upper() == marker
            and epilog.name_time(tail) is not None
        ):
            return stem[: -width - 1]
    return stem


def _result(path: Path, relative: str) -> dict[str, Any]:
    out: dict[str, Any] = {"path": relative, "time": None, "time_from": None, "status": "unreadable", "reason": None}
    try:
        handle, size = open_regular(path)
    except NotRegular:
        out["reason"] = "not a regular file"
        return out
    except OSError as exc:
        out["reason"] = exc.strerror or type(exc).__name__
        return out
    with handle:
        try:
            mtime = os.fstat(handle.fileno()).st_mtime
            named = epilog.name_time(path.name)
            out["time"] = stamp(named or datetime.fromtimestamp(mtime, tz=UTC))
            out["time_from"] = "name" if named else "mtime"
            if size > epilog.MAX_RESULT_BYTES:
                out["reason"] = f"larger than {epilog.MAX_RESULT_BYTES // (1024 * 1024)} MiB"
                return out
            data = handle.read(epilog.MAX_RESULT_BYTES + 1)
        except OSError as exc:
            out["reason"] = exc.strerror or type(exc).__name__
            return out
    try:
        status, failures = epilog.parse_diag(epilog.find_json_object(data.decode("utf-8", "replace")))
    except epilog.UnreadableResult as exc:
        out["reason"] = str(exc)
        return out
    out["status"] = status
    out["failures"] = len(failures)
    return out


def check_epilog(c: Checker, root: Path | None) -> dict[str, Any] | None:
    """What the epilog directory holds per node, read by the DCGM reader's own parsing."""
    if root is None:
        c.say("epilog results: not configured (ATTRIBUTION_EPILOG_DIR); slow answers insufficient_telemetry")
        c.problem(
            WARNING,
            "ATTRIBUTION_EPILOG_DIR",
            "is not set, so every slow request answers insufficient_telemetry; set it to the epilog results' directory",
        )
        return None
    details: dict[str, Any] = {"dir": str(root), "hosts": [], "skipped": []}
    c.say(f"epilog results: {root}")
    entries = c.folder(root, "epilog directory")
    if entries is None:
        return details
    per_node: dict[str, list[tuple[str, Path]]] = {}
    for entry in entries:
        kind = entry_kind(entry)
        if kind == "dir":
            try:
                inner = list_folder(Path(entry.path))
            except OSError as exc:
                c.problem(ERROR, f"{entry.name}/", f"the epilog folder cannot be read ({exc.strerror})")
                continue
            bucket = per_node.setdefault(entry.name, [])
            for sub in inner:
                where = f"{entry.name}/{sub.name}"
                sub_kind = entry_kind(sub)
                if sub_kind == "file" and sub.name.endswith(".json"):
                    bucket.append((where, Path(sub.path)))
                elif sub_kind == "dir" and nested_holds_anything(sub.path) is not False:
                    c.problem(
                        ERROR,
                        f"{where}/",
                        "is a folder inside a host's epilog folder, and the reader reads one level only "
                        "(<dir>/<node>/<result>.json): move its results up",
                    )
                else:
                    details["skipped"].append(
                        {"path": where, "reason": "not a .json file" if sub_kind == "file" else sub_kind}
                    )
        elif kind == "file" and entry.name.endswith(".json"):
            per_node.setdefault(epilog_node(entry.name[: -len(".json")]), []).append((entry.name, Path(entry.path)))
        else:
            details["skipped"].append({"path": entry.name, "reason": "not a .json file" if kind == "file" else kind})
    for item in details["skipped"]:
        c.problem(WARNING, item["path"], f"is not read by the epilog reader ({item['reason']})")
    if not any(per_node.values()):
        c.problem(WARNING, str(root), "holds no epilog result yet, so slow requests answer insufficient_telemetry")
    lines: list[str] = []
    for node, found in sorted(per_node.items(), key=lambda kv: kv[0].lower()):
        results = []
        for relative, path in sorted(found, reverse=True)[:MAX_FILES_PER_HOST]:
            if c.expired(relative):
                break
            result = _result(path, relative)
            if result["status"] == "unreadable":
                c.problem(
                    ERROR,
                    relative,
                    f"the epilog result cannot be read ({result['reason']}); its node stays uncertain in every slow "
                    "answer: fix or remove it",
                )
            results.append(result)
        not_listed = max(0, len(found) - len(results))
        details["hosts"].append({"name": node, "results": results, "results_not_listed": not_listed})
        lines.append(f"  host {node}")
        for r in results:
            when = f"{r['time']} (from the {'name' if r['time_from'] == 'name' else 'file time'})" if r["time"] else ""
            reason = f" ({r['reason']})" if r["reason"] else ""
            lines.append(f"    {r['path']}: {r['status']}{reason}" + (f"; {when}" if when else ""))
        if not_listed:
            lines.append(f"    ... and {not_listed} more, not read")
    statuses: dict[str, int] = {}
    for host in details["hosts"]:
        for r in host["results"]:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    read = sum(statuses.values())
    c.say(f"  hosts: {len(details['hosts'])}; results: {read} read" + (f" ({tally(statuses)})" if read else ""))
    for line in lines:
        c.detail(line)
    return details


