"""The one place evidence is merged per node: items from every reader become at most one finding per target.

Each signal's rules (kernel, DCGM) turn what was read into `EvidenceItem`s per scope node; `merge_per_node` gathers
the items of every reader for a node and `finding` makes them its one finding. Combining findings across signals
(kernel and job logs) is `merge.py`'s.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from providers.base import AttributionOutcome, ErrorType, Evidence, Finding, ProviderError, Target, cut_text
from providers.telemetry.ranking import CATEGORY_RANK


@dataclass(frozen=True)
class EvidenceItem:
    """One piece of evidence for a finding."""

    observed_at: datetime
    category: str
    source: str  # the Evidence.source token: syslog, loki, dcgm, ...
    message: str
    #: items with equal keys are repeats of one event (same device and code); the first of each shows first
    key: Hashable = None


def worst_category(items: Iterable[EvidenceItem]) -> str:
    return max((i.category for i in items), key=lambda c: CATEGORY_RANK[c])


def select_evidence(items: Sequence[EvidenceItem], limit: int) -> tuple[Evidence, ...]:
    """At most `limit` items: the distinct events first (the earliest of each key, the worst category preferred),
    in time order, then repeats in time order. A burst of one line never hides the other events."""
    worst = worst_category(items)
    ordered = sorted(items, key=lambda i: i.observed_at)
    seen: set[Hashable] = set()
    distinct: list[EvidenceItem] = []
    repeats: list[EvidenceItem] = []
    for item in ordered:
        key = (item.category, item.key) if item.key is not None else (item.category, item.message)
        (repeats if key in seen else distinct).append(item)
        seen.add(key)

    def pick(pool: list[EvidenceItem], room: int) -> list[EvidenceItem]:
        return sorted(
            sorted(pool, key=lambda i: (i.category != worst, i.observed_at))[:room], key=lambda i: i.observed_at
        )

    chosen = pick(distinct, limit)
    chosen += pick(repeats, limit - len(chosen))
    return tuple(Evidence(source=i.source, message=cut_text(i.message), observed_at=i.observed_at) for i in chosen)


def finding(target: Target, items: Sequence[EvidenceItem], limit: int) -> Finding:
    """One finding: the worst category, the first item's time, bounded evidence."""
    return Finding(
        target=target,
        error_category=worst_category(items),
        observed_at=min(i.observed_at for i in items),
        evidence=select_evidence(items, limit),
    )


def merge_per_node(
    nodes: Sequence[str], readers: Iterable[Mapping[str, Sequence[EvidenceItem]]]
) -> dict[str, list[EvidenceItem]]:
    """The items of every reader, per scope node, in scope order (nodes with none are absent)."""
    merged: dict[str, list[EvidenceItem]] = {}
    readers = list(readers)
    present = set().union(*readers)
    for node in [n for n in nodes if n in present]:
        items = [item for reader in readers for item in reader.get(node, ())]
        if items:
            merged[node] = items
    return merged


def missing_message(missing: int, total: int, what: str) -> str:
    """The note on scope nodes that had no telemetry of one kind in the window."""
    return f"no {what} for {missing} of {total} nodes in the window"


def outcome(findings: Sequence[Finding], unattributed: Sequence[Target], notes: Sequence[str]) -> AttributionOutcome:
    """An outcome whose notes, when there are any, are its `insufficient_telemetry` error."""
    error = ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, "; ".join(notes)) if notes else None
    return AttributionOutcome(attributions=tuple(findings), unattributed_targets=tuple(unattributed), error=error)
