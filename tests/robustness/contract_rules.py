"""An independent reading of docs/contract.md's request rules that the OpenAPI document cannot (or does not) express.

The fuzz test uses it as an oracle: a schema-valid request that breaks one of these rules must get a 422 naming
the broken field, and only such a request may be refused.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any

FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn"}
_TIMESTAMP = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2})(?:\.(?P<frac>\d+))?"
    r"(?:(?P<z>[Zz])|(?P<sign>[+-])(?P<oh>\d{2}):(?P<om>\d{2}))"
)


def is_canonical(value: str) -> bool:
    """NFC, no leading or trailing white space, no character of category Cc, Cf, Cs, Co or Cn."""
    if value != value.strip():
        return False
    if any(unicodedata.category(char) in FORBIDDEN_CATEGORIES for char in value):
        return False
    return unicodedata.normalize("NFC", value) == value


def parse_timestamp(value: str) -> datetime | None:
    """The instant in UTC, or None when the service may refuse the text (not RFC 3339 with an offset, or out of
    the range a service can represent: Python's datetime, leap seconds, more than microsecond precision)."""
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        return None
    frac = match["frac"] or ""
    if frac[6:].strip("0"):
        return None
    try:
        offset = timezone.utc
        if not match["z"]:
            delta = timedelta(hours=int(match["oh"]), minutes=int(match["om"]))
            offset = timezone(-delta if match["sign"] == "-" else delta)
        local = datetime.fromisoformat(f"{match['date']}T{match['h']}:{match['m']}:{match['s']}").replace(
            microsecond=int(frac[:6].ljust(6, "0")), tzinfo=offset
        )
        return local.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None


def broken_rules(body: Any) -> set[tuple[Any, ...]]:
    """The `loc` of every contract rule a schema-valid body breaks beyond what the document publishes."""
    broken: set[tuple[Any, ...]] = set()
    if not isinstance(body, dict):
        return broken
    phase = body.get("phase")
    if phase == "fast" and "continue_session" in body:
        broken.add(("body", "continue_session"))
    if phase == "slow" and "continue_session" not in body:
        broken.add(("body", "continue_session"))
    if isinstance(body.get("workload_id"), str) and not is_canonical(body["workload_id"]):
        broken.add(("body", "workload_id"))
    workload = body.get("workload_context")
    if isinstance(workload, dict) and isinstance(workload.get("workflow_id"), str):
        if not is_canonical(workload["workflow_id"]):
            broken.add(("body", "workload_context", "workflow_id"))
    failure = body.get("failure_context")
    if isinstance(failure, dict) and isinstance(failure.get("detected_at"), str):
        if parse_timestamp(failure["detected_at"]) is None:
            broken.add(("body", "failure_context", "detected_at"))
    scope = body.get("scope")
    if isinstance(scope, dict):
        for index, node in enumerate(scope.get("nodes") or []):
            if isinstance(node, str) and not is_canonical(node):
                broken.add(("body", "scope", "nodes", index))
        times = {}
        for name in ("start_time", "end_time"):
            if isinstance(scope.get(name), str):
                times[name] = parse_timestamp(scope[name])
                if times[name] is None:
                    broken.add(("body", "scope", name))
        if times.get("start_time") and times.get("end_time") and not times["start_time"] < times["end_time"]:
            broken.add(("body", "scope", "end_time"))
    return broken
