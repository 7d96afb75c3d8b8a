"""The epilog reader: DCGM diagnostic results (`dcgmi diag -j`) per node, read from a directory.

Layout: `<dir>/<node>/<anything>.json`, `<dir>/<node>.json` or `<dir>/<node>-<stamp>.json`, where `<node>` matches a
scope node as a whole (identity.NodeNames) and `<stamp>` is exactly one of the UTC forms `20260909T121000Z`,
`2026-09-09T12:10:00Z` or `2026-09-09T12-10-00Z`. A result's time is such a stamp in its file name, else the file's
mtime.

Shapes (NVIDIA/DCGM `dcgmi/Diag.cpp` and `nvvs/include/NvvsJsonStrings.h`, tags v2.3.4, v3.3.7, v4.2.3): DCGM 4.x
`{"DCGM Diagnostic": {"test_categories": [...]}, "entity_groups": ..., "metadata": ...}` with results holding
`entity_group`/`entity_id`, `warnings` as objects with `warning`, `info` as a list and a `test_summary`; DCGM 2.x and
3.x `{"DCGM GPU Diagnostic": {...}}` with `gpu_id` (a string for plugin tests, a number for deployment tests) or
`gpu_ids` ("0,1,2,3"), `warnings` whose objects may hold the text under `warning` or `warnings`, and `info` a string.
jsoncpp fills skipped array slots with `null`, so any array may hold nulls. `--iterations` wraps the runs in
`{"iterations": [...], "Overall Result": ...}`. A diagnostic that could not run is `{... "runtime_error": "..."}`.
Status is Pass, Fail, Warn or Skip in any letter case (4.x writes a warning as Fail). Text before or after the JSON
object (banners, warnings printed by a wrapper script) is skipped.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure
from providers.telemetry.identity import NodeNames

log = logging.getLogger("attribution_adapter.telemetry")

_STAMP_FORMS = (
    re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})T([0-9]{2})([0-9]{2})([0-9]{2})Z", re.IGNORECASE),
    re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})Z", re.IGNORECASE),
    re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2})-([0-9]{2})-([0-9]{2})Z", re.IGNORECASE),
)
#: one epilog result larger than this is not a `dcgmi diag -j` document
MAX_RESULT_BYTES = 16 * 1024 * 1024
#: where a file holds text around the JSON, at most this many `{` are tried as the object's start
MAX_JSON_STARTS = 256
_TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic", "iterations")
_DEPLOYMENT_TESTS = ("software", "denylist", "nvml_library", "cuda_main_library")


@dataclass(frozen=True)
class TestFailure:
    test: str
    category: str
    message: str
    entity: str  # the GPU (or other entity) the result is about, "" when the result names none


@dataclass
class NodeResults:
    """What the epilog results inside the window say about one node."""

    failures: list[tuple[datetime, TestFailure]] = field(default_factory=list)
    passed: bool = False
    unreadable: bool = False  # a result file of the node could not be read: the node is not seen to be fine


class UnreadableResult(ValueError):
    """The file holds no DCGM diagnostic result this reader understands."""


def failure_category(test: str, test_category: str) -> str:
    """The error_category of a failed DCGM test, from its name and its DCGM category."""
    name = test.lower().replace(" ", "_")
    if "memory" in name or "memtest" in name or "retirement" in name or "remap" in name:
        return "gpu_memory"
    if "pcie" in name:
        return "pcie"
    if "nvlink" in name or "nvbandwidth" in name:
        return "nvlink"
    if test_category.lower() == "deployment" or name in _DEPLOYMENT_TESTS:
        return "gpu_driver"  # deployment checks look at the driver and software environment
    return "gpu_hardware"


def _warning_texts(result: dict[str, Any]) -> list[str]:
    warnings = result.get("warnings")
    items = warnings if isinstance(warnings, list) else [warnings]
    texts: list[str] = []
    for w in items:
        if isinstance(w, str) and w:
            texts.append(w)
        elif isinstance(w, dict):
            # 3.x deployment tests put the text under "warnings", every other writer under "warning".
            text = w.get("warning", w.get("warnings"))
            if isinstance(text, str) and text:
                texts.append(text)
    return texts


def _entity(result: dict[str, Any]) -> str:
    for key in ("entity_id", "gpu_id", "gpu_ids"):
        value = result.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return str(value)
    return ""


def _items(value: Any) -> Iterator[dict[str, Any]]:
    """The objects of a JSON array, skipping the nulls (and anything else) jsoncpp may leave in it."""
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, dict))


def _status(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def parse_diag(doc: Any) -> tuple[str, list[TestFailure]]:
    """Read one `dcgmi diag -j` document: ("fail"|"pass"|"runtime_error"|"empty", failures).

    Raises UnreadableResult when the document is not a DCGM diagnostic result at all.
    """
    if not isinstance(doc, dict):
        raise UnreadableResult("not a JSON object")
    if isinstance(doc.get("iterations"), list):
        runs = [parse_diag(run) for run in _items(doc["iterations"])]
        if not runs:
            raise UnreadableResult("no iteration holds a result")
        failures = [f for _, fs in runs for f in fs]
        statuses = {s for s, _ in runs}
        status = "fail" if failures else "pass" if "pass" in statuses else next(iter(statuses))
        return status, failures
    diag = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))  # 4.x, then 3.x and older
    if not isinstance(diag, dict):
        raise UnreadableResult("no DCGM diagnostic object")
    if diag.get("runtime_error") or doc.get("runtime_error"):
        return "runtime_error", []
    categories = diag.get("test_categories")
    if not isinstance(categories, list):
        raise UnreadableResult("no test_categories")
    failures: list[TestFailure] = []
    passed = False
    for cat in _items(categories):
        cat_name = str(cat.get("category", ""))
        for test in _items(cat.get("tests")):
            name = str(test.get("name", "unnamed test"))
            category = failure_category(name, cat_name)
            test_failed = False
            for result in _items(test.get("results")):
                status = _status(result.get("status"))
                if status in ("fail", "warn"):
                    test_failed = True
                    entity = _entity(result)
                    texts = _warning_texts(result) or [f"{name} failed on GPU {entity or '?'}"]
                    failures.extend(TestFailure(name, category, t, entity) for t in texts)
                elif status == "pass":
                    passed = True
            summary = test.get("test_summary")
            if not test_failed and isinstance(summary, dict) and _status(summary.get("status")) in ("fail", "warn"):
                texts = _warning_texts(summary) or [f"{name} failed"]
                failures.extend(TestFailure(name, category, t, "") for t in texts)
    if failures:
        return "fail", failures
    return ("pass" if passed else "empty"), []


def find_json_object(text: str) -> Any:
    """The DCGM JSON object in `text`, which may hold other text before or after it (bounded search)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start >= 0 and tries < MAX_JSON_STARTS:
        tries += 1
        try:
            doc, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and any(k in doc for k in _TOP_KEYS):
            return doc
        start = text.find("{", start + 1)
    raise UnreadableResult("no DCGM JSON object in the file")


def name_time(name: str) -> datetime | None:
    """The UTC time stamped anywhere in a file name, or None."""
    for form in _STAMP_FORMS:
        m = form.search(name)
        if m:
            return _stamp(m)
    return None


def _stamp(m: re.Match[str]) -> datetime | None:
    try:
        return datetime(*(int(g) for g in m.groups()), tzinfo=timezone.utc)  # type: ignore[misc]
    except ValueError:
        return None


def _node_of_file(stem: str, names: NodeNames) -> str | None:
    """`<node>` or `<node>-<stamp>` with `<stamp>` exactly one of the stamp forms; never a name prefix."""
    node = names.node_for(stem)
    if node is not None:
        return node
    for form in _STAMP_FORMS:
        m = re.fullmatch(r"(.+)-(" + form.pattern + ")", stem, re.IGNORECASE)
        if m is not None:
            return names.node_for(m.group(1))
    return None


def _result_files(root: Path, names: NodeNames) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    try:
        entries = list(os.scandir(root))
    except OSError as exc:
        raise ProviderProcessingError(
            "the epilog directory could not be read", kind=SourceFailure.UNREADABLE
        ) from exc
    for entry in entries:
        try:
            is_dir, is_file = entry.is_dir(), entry.is_file()
        except OSError:
            continue
        if is_dir:
            node = names.node_for(entry.name)
            if node is None:
                continue
            try:
                inner = [Path(e.path) for e in os.scandir(entry.path) if e.name.endswith(".json") and e.is_file()]
            except OSError:
                log.warning("epilog folder %s could not be read", entry.name)
                found.setdefault(node, [])
                continue
            found.setdefault(node, []).extend(inner)
        elif is_file and entry.name.endswith(".json"):
            node = _node_of_file(entry.name[: -len(".json")], names)
            if node is not None:
                found.setdefault(node, []).append(Path(entry.path))
    return found


def read_epilog(
    root: Path, nodes: Iterable[str], start: datetime, end: datetime, deadline: Deadline
) -> dict[str, NodeResults]:
    """The in-window results per node. One unreadable file makes its node uncertain, never the whole answer fail."""
    names = NodeNames(nodes)
    out: dict[str, NodeResults] = {}
    for node, paths in _result_files(root, names).items():
        for path in sorted(paths):
            if deadline.expired:
                raise ProviderTimeoutError("reading the epilog results did not finish in time")
            relative = path.relative_to(root).as_posix()
            try:
                st = path.stat()
                when = name_time(path.name) or datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)
                if not (start <= when <= end):
                    continue
                if st.st_size > MAX_RESULT_BYTES:
                    raise UnreadableResult("larger than a DCGM result can be")
                with path.open("rb") as f:
                    data = f.read(MAX_RESULT_BYTES + 1)
                status, failures = parse_diag(find_json_object(data.decode("utf-8", "replace")))
            except (OSError, UnreadableResult) as exc:
                # One bad file says nothing about its node; the other nodes' results stand.
                log.warning("epilog result %s could not be read: %s", relative, type(exc).__name__)
                out.setdefault(node, NodeResults()).unreadable = True
                continue
            if status == "fail":
                out.setdefault(node, NodeResults()).failures.extend((when, f) for f in failures)
            elif status == "pass":
                out.setdefault(node, NodeResults()).passed = True
            # runtime_error and empty results: the diagnostic did not run, so like missing telemetry
    return out
