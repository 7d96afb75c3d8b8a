"""Epilog health-check results: DCGM diagnostic JSON (`dcgmi diag -j`) read from a directory per node.

Layout: `<dir>/<node>/<anything>.json`, `<dir>/<node>.json` or `<dir>/<node>-<anything>.json` (the longest scope
node that prefixes the name wins). A result's time is a UTC timestamp in its file name (`20260909T121000Z`,
`2026-09-09T12:10:00Z` or `2026-09-09T12-10-00Z`), else the file's mtime.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError

_NAME_TIME = re.compile(r"(\d{4})-?(\d\d)-?(\d\d)T(\d\d)[:-]?(\d\d)[:-]?(\d\d)(?:\.\d+)?Z", re.IGNORECASE)
#: one epilog result larger than this is not a `dcgmi diag -j` document
MAX_RESULT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class TestFailure:
    test: str
    category: str
    message: str


@dataclass
class NodeResults:
    """What the epilog results inside the window say about one node."""

    failures: list[tuple[datetime, TestFailure]] = field(default_factory=list)
    passed: bool = False


def failure_category(test: str, test_category: str) -> str:
    """The error_category of a failed DCGM test, from its name and its DCGM category."""
    name = test.lower().replace(" ", "_")
    if "memory" in name or "memtest" in name:
        return "gpu_memory"
    if "pcie" in name:
        return "pcie"
    if "nvlink" in name or "nvbandwidth" in name:
        return "nvlink"
    if test_category.lower() == "deployment" or name in ("software", "denylist", "nvml_library", "cuda_main_library"):
        return "gpu_driver"  # deployment checks look at the driver and software environment
    return "gpu_hardware"


def _warning_texts(result: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    warnings = result.get("warnings")
    if isinstance(warnings, list):
        for w in warnings:
            if isinstance(w, dict) and isinstance(w.get("warning"), str):
                texts.append(w["warning"])
            elif isinstance(w, str):
                texts.append(w)
    elif isinstance(warnings, str):
        texts.append(warnings)
    return texts


def parse_diag(doc: Any) -> tuple[str, list[TestFailure]]:
    """Read one `dcgmi diag -j` document: ("fail"|"pass"|"runtime_error"|"empty", failures).

    Raises ValueError when the document is not a DCGM diagnostic result at all.
    """
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))  # 4.x, then 3.x and older
    if not isinstance(diag, dict):
        raise ValueError("no DCGM diagnostic object")
    if diag.get("runtime_error") or doc.get("runtime_error"):
        return "runtime_error", []
    categories = diag.get("test_categories")
    if not isinstance(categories, list):
        raise ValueError("no test_categories")
    failures: list[TestFailure] = []
    passed = False
    for cat in categories:
        if not isinstance(cat, dict) or not isinstance(cat.get("tests"), list):
            raise ValueError("malformed test category")
        cat_name = str(cat.get("category", ""))
        for test in cat["tests"]:
            if not isinstance(test, dict):
                raise ValueError("malformed test")
            name = str(test.get("name", "unnamed test"))
            results = test.get("results")
            if not isinstance(results, list):
                results = []
            test_failed = False
            for result in results:
                if not isinstance(result, dict):
                    raise ValueError("malformed test result")
                status = str(result.get("status", "")).lower()
                if status == "fail":
                    test_failed = True
                    entity = result.get("entity_id", result.get("gpu_id", result.get("gpu_ids", "?")))
                    texts = _warning_texts(result) or [f"{name} failed on GPU {entity}"]
                    failures.extend(TestFailure(name, failure_category(name, cat_name), t) for t in texts)
                elif status == "pass":
                    passed = True
            summary = test.get("test_summary")
            if not test_failed and isinstance(summary, dict) and str(summary.get("status", "")).lower() == "fail":
                failures.append(TestFailure(name, failure_category(name, cat_name), f"{name} failed"))
    if failures:
        return "fail", failures
    return ("pass" if passed else "empty"), []


def _name_time(name: str) -> datetime | None:
    m = _NAME_TIME.search(name)
    if not m:
        return None
    try:
        return datetime(*(int(g) for g in m.groups()), tzinfo=timezone.utc)  # type: ignore[misc]
    except ValueError:
        return None


def _result_files(root: Path, nodes: Iterable[str]) -> dict[str, list[Path]]:
    by_lower = {n.lower(): n for n in nodes}
    found: dict[str, list[Path]] = {}
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        raise ProviderProcessingError("the epilog directory could not be read") from exc
    for entry in entries:
        if entry.is_dir():
            node = by_lower.get(entry.name.lower())
            if node is None:
                continue
            try:
                inner = [Path(e.path) for e in os.scandir(entry.path) if e.name.endswith(".json") and e.is_file()]
            except OSError as exc:
                raise ProviderProcessingError("an epilog folder could not be read") from exc
            found.setdefault(node, []).extend(inner)
        elif entry.name.endswith(".json") and entry.is_file():
            stem = entry.name[: -len(".json")].lower()
            node = by_lower.get(stem)
            if node is None:
                # `<node>-<anything>`: node names hold dashes themselves, so take the longest node that fits.
                cuts = [i for i, ch in enumerate(stem) if ch == "-"]
                for i in reversed(cuts):
                    node = by_lower.get(stem[:i])
                    if node is not None:
                        break
            if node is not None:
                found.setdefault(node, []).append(Path(entry.path))
    return found


def read_epilog(
    root: Path, nodes: Iterable[str], start: datetime, end: datetime, deadline: Deadline
) -> dict[str, NodeResults]:
    """The readable, in-window results per node. A node with only unreadable or runtime_error results is absent."""
    out: dict[str, NodeResults] = {}
    for node, paths in _result_files(root, nodes).items():
        for path in sorted(paths):
            if deadline.expired:
                raise ProviderTimeoutError("reading the epilog results did not finish in time")
            try:
                st = path.stat()
                when = _name_time(path.name) or datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)
                if not (start <= when <= end) or st.st_size > MAX_RESULT_BYTES:
                    continue
                status, failures = parse_diag(json.loads(path.read_bytes()))
            except (OSError, ValueError, RecursionError):
                # Unreadable or malformed (json.JSONDecodeError is a ValueError): this file says nothing, so it
                # counts like missing telemetry for its node rather than failing the whole request.
                continue
            if status == "fail":
                out.setdefault(node, NodeResults()).failures.extend((when, f) for f in failures)
            elif status == "pass":
                out.setdefault(node, NodeResults()).passed = True
            # runtime_error and empty results: the diagnostic did not run, so like missing telemetry
    return out
