"""The contract guard: every provider answer is checked against docs/contract.md before any of it reaches a caller.

An answer that breaks the contract is never passed through, not even in part: the caller gets `service_error`.
A checked part that needed no normalising is passed on as the object the provider made when it is of the exact
frozen type (not a subclass, which could compute its fields): such an object cannot change afterwards.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timezone

from providers.base import (
    MAX_EVIDENCE,
    MAX_EVIDENCE_MESSAGE,
    AllJobResources,
    AttributionOutcome,
    ErrorType,
    Evidence,
    Finding,
    NodeTarget,
    ProviderError,
    Scope,
    cut_text,
)

TOKEN = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_ERROR_MESSAGE = 512


class ContractViolation(Exception):
    """The provider's answer broke the contract; the message says how (for logs, never evidence text)."""


def public_message(text: str, fallback: str) -> str:
    """One short line for `error.message`: the first line, bounded; the fallback when empty."""
    first_line = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    return cut_text(first_line or fallback, MAX_ERROR_MESSAGE)


def _utc(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ContractViolation(f"{what} is not a timezone-aware datetime")
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise ContractViolation(f"{what} is out of range") from None


def _token(value: object, what: str) -> str:
    if not isinstance(value, str) or not TOKEN.fullmatch(value):
        raise ContractViolation(f"{what} is not a token")
    return value


def _target(target: object, scope_nodes: frozenset[str], what: str) -> NodeTarget | AllJobResources:
    if isinstance(target, AllJobResources):
        return target
    if isinstance(target, NodeTarget):
        if target.name not in scope_nodes:
            raise ContractViolation(f"{what} names a node outside scope.nodes")
        return target
    raise ContractViolation(f"{what} is not a Target")


_EXACT_TARGETS = frozenset({NodeTarget, AllJobResources})


def _targets(
    targets: tuple | list, scope_nodes: frozenset[str]
) -> tuple[tuple[NodeTarget | AllJobResources, ...], set[object] | None]:
    """`unattributed_targets` checked, and their keys (`_key`, cheaper to hash than the dataclasses) when every
    target is of an exact target type, else None. In one bulk pass when every item is a plain target in scope (the
    common case, up to 16,384 of them), else item by item, which names the first bad one."""
    targets = tuple(targets)
    if set(map(type, targets)) <= _EXACT_TARGETS:
        names = [t.name for t in targets if type(t) is NodeTarget]
        if scope_nodes.issuperset(names):
            keys: set[object] = set(names)
            if len(names) < len(targets):
                keys.add(None)  # AllJobResources: two of them make one key, so the repeat is seen
            return targets, keys
    checked = tuple(_target(t, scope_nodes, f"unattributed_targets[{i}]") for i, t in enumerate(targets))
    return checked, _keys(checked)


def _key(target: object) -> object:
    """A hashable stand-in equal for equal targets of the two exact target types: the node name, or None."""
    return target.name if type(target) is NodeTarget else None if type(target) is AllJobResources else target


def _keys(targets: tuple) -> set[object] | None:
    """The targets' `_key`s; None when some target has another type."""
    if not set(map(type, targets)) <= _EXACT_TARGETS:
        return None
    return {t.name if type(t) is NodeTarget else None for t in targets}


def _evidence(item: object, what: str) -> Evidence:
    if not isinstance(item, Evidence):
        raise ContractViolation(f"{what} is not Evidence")
    if not isinstance(item.message, str):
        raise ContractViolation(f"{what}.message is not a string")
    observed_at = None if item.observed_at is None else _utc(item.observed_at, f"{what}.observed_at")
    source = _token(item.source, f"{what}.source")
    message = cut_text(item.message, MAX_EVIDENCE_MESSAGE)
    if type(item) is Evidence and observed_at is item.observed_at and message is item.message:
        return item
    return Evidence(source=source, message=message, observed_at=observed_at)


def _finding(finding: object, scope_nodes: frozenset[str], what: str) -> Finding:
    if not isinstance(finding, Finding):
        raise ContractViolation(f"{what} is not a Finding")
    evidence = finding.evidence
    if not isinstance(evidence, (tuple, list)):
        raise ContractViolation(f"{what}.evidence is not a sequence")
    if len(evidence) > MAX_EVIDENCE:
        raise ContractViolation(f"{what} has {len(evidence)} evidence items, more than {MAX_EVIDENCE}")
    confidence = finding.confidence
    if confidence is not None and (
        type(confidence) not in (int, float) or not math.isfinite(confidence) or not 0 <= confidence <= 1
    ):
        raise ContractViolation(f"{what}.confidence is not a number in 0..1")
    target = _target(finding.target, scope_nodes, f"{what}.target")
    category = _token(finding.error_category, f"{what}.error_category")
    observed_at = _utc(finding.observed_at, f"{what}.observed_at")
    checked = tuple(_evidence(item, f"{what}.evidence[{i}]") for i, item in enumerate(evidence))
    if (
        type(finding) is Finding
        and type(evidence) is tuple
        and observed_at is finding.observed_at
        and (confidence is None or type(confidence) is float)
        and all(map(operator.is_, checked, evidence))
    ):
        return finding
    return Finding(
        target=target,
        error_category=category,
        observed_at=observed_at,
        evidence=checked,
        confidence=None if confidence is None else float(confidence),
    )


def _error(error: object) -> ProviderError | None:
    if error is None:
        return None
    if not isinstance(error, ProviderError) or not isinstance(error.type, ErrorType):
        raise ContractViolation("error is not a ProviderError with a public type")
    if not isinstance(error.message, str):
        raise ContractViolation("error.message is not a string")
    message = public_message(error.message, error.type.value.replace("_", " "))
    if type(error) is ProviderError and type(error.type) is ErrorType and message == error.message:
        return error
    return ProviderError(error.type, message)


def check_outcome(outcome: object, scope: Scope) -> AttributionOutcome:
    """The outcome, normalised (UTC times, bounded texts), or ContractViolation."""
    if not isinstance(outcome, AttributionOutcome):
        raise ContractViolation("the provider did not return an AttributionOutcome")
    scope_nodes = frozenset(scope.nodes)
    if not isinstance(outcome.attributions, (tuple, list)) or not isinstance(
        outcome.unattributed_targets, (tuple, list)
    ):
        raise ContractViolation("attributions and unattributed_targets must be sequences")
    findings = tuple(_finding(f, scope_nodes, f"attributions[{i}]") for i, f in enumerate(outcome.attributions))
    unattributed, keys = _targets(outcome.unattributed_targets, scope_nodes)
    if keys is None:
        distinct = set(unattributed)
        if len(distinct) != len(unattributed):
            raise ContractViolation("unattributed_targets repeats a target")
        if {f.target for f in findings} & distinct:
            raise ContractViolation("a target stands in both attributions and unattributed_targets")
    else:
        if len(keys) != len(unattributed):
            raise ContractViolation("unattributed_targets repeats a target")
        if any(_key(f.target) in keys for f in findings):
            raise ContractViolation("a target stands in both attributions and unattributed_targets")
    error = _error(outcome.error)
    if error is not None and error.type.blocks_findings and findings:
        raise ContractViolation(f"findings beside error.type {error.type.value}")
    state = outcome.session_state
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and type(v) in (str, int) for k, v in state.items()
    ):
        raise ContractViolation("session_state is not a mapping of strings to strings or integers")
    if (
        type(outcome) is AttributionOutcome
        and type(outcome.attributions) is tuple
        and unattributed is outcome.unattributed_targets
        and error is outcome.error
        and all(map(operator.is_, findings, outcome.attributions))
    ):
        return outcome
    return replace(outcome, attributions=findings, unattributed_targets=unattributed, error=error)
