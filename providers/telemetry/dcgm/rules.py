"""DCGM rules: epilog diagnostic results into findings (failed tests), unattributed nodes (passing) and notes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from providers.base import AttributionOutcome, NodeTarget
from providers.telemetry.dcgm.results import NodeResults
from providers.telemetry.evidence import EvidenceItem, finding, merge_per_node, missing_message, outcome

#: the Evidence.source token of every DCGM result
SOURCE = "dcgm"


def attribute_epilog(nodes: Sequence[str], results: Mapping[str, NodeResults], max_evidence: int) -> AttributionOutcome:
    """Turn epilog DCGM results into an outcome: failed tests are findings, passing nodes unattributed."""
    unreadable = [n for n in nodes if n in results and results[n].unreadable]
    readable = [n for n in nodes if n in results and (results[n].failures or results[n].passed)]
    notes: list[str] = []
    if unreadable:
        notes.append(f"epilog health-check results of {len(unreadable)} node(s) could not be read")
    if not readable:
        notes.insert(0, f"no epilog health-check results for any of the {len(nodes)} nodes in the window")
        return outcome([], [], notes)
    items = {
        node: [
            EvidenceItem(when, f.category, SOURCE, f"{f.test}: {f.message}", (f.test, f.entity))
            for when, f in results[node].failures
        ]
        for node in readable
    }
    merged = merge_per_node(nodes, [items])
    findings = [finding(NodeTarget(node), node_items, max_evidence) for node, node_items in merged.items()]
    unattributed = [
        NodeTarget(n) for n in readable if n not in merged and results[n].passed and not results[n].unreadable
    ]
    missing = sum(1 for n in nodes if n not in readable)
    if missing:
        notes.insert(0, missing_message(missing, len(nodes), "epilog health-check results"))
    return outcome(findings, unattributed, notes)
