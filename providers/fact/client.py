"""FACT's client surface as the Adapter relies on it, and the translation of its result into public findings."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from providers.base import (
    AllJobResources,
    AttributionOutcome,
    AttributionRequest,
    ErrorType,
    Evidence,
    Finding,
    NodeTarget,
    ProviderError,
    ProviderProcessingError,
    SourceFailure,
    cut_text,
)

log = logging.getLogger("attribution_adapter.providers.fact")

MAX_ATTRIBUTOR_ID = 200
MSG_UNREADABLE = "FACT answered with an unreadable result"
MSG_OUT_OF_SCOPE = "FACT named a node outside the request's scope"
MSG_TOO_LITTLE = "FACT held too little telemetry to attribute every target in scope"

_NON_TOKEN = re.compile(r"[^a-z0-9]+")
PRINTABLE_ATTRIBUTOR_ID = re.compile(rf"[\x20-\x7e]{{1,{MAX_ATTRIBUTOR_ID}}}")


# ---------------------------------------------------------------- the client surface the Adapter relies on


class FactSymptom(Protocol):
    category: str  # FACT's symptom kind, e.g. "GPU Xid"; normalised to a contract token here
    message: str
    observed_at: datetime  # timezone-aware


class FactVerdict(Protocol):
    """FACT's verdict on one node (`node` set) or on the job's resources as a whole (`node` None)."""

    node: str | None
    symptoms: Sequence[FactSymptom]
    probability: float | None  # 0..1 when FACT has a calibrated one; may be absent


class FactAttribution(Protocol):
    """What both calls return; `faulty_nodes` verdicts all name their node."""

    attributor_id: str  # what `continue_attribution` needs; printable ASCII, at most 200 characters
    faulty_nodes: Sequence[FactVerdict]
    analysed_nodes: Sequence[str]  # every node FACT looked at, faulty or not
    job_verdict: FactVerdict | None
    insufficient_telemetry: bool


class FactClient(Protocol):
    """`fact_client.Client(endpoint=...)`: built once, shared by all request threads, so it must be thread-safe.

    The package may expose `__version__` (a str) and `TimeoutError`. Both calls raise `fact_client.TimeoutError`
    or the builtin TimeoutError when `timeout` seconds pass, and send `headers` (W3C trace context) to FACT.
    """

    def start_attribution(
        self,
        *,
        workload_id: str,
        nodes: Sequence[str],
        ranks: Sequence[int],
        detected_at: datetime,
        detection_signal: str,
        timeout: float,
        headers: Mapping[str, str],
    ) -> FactAttribution: ...

    def continue_attribution(
        self,
        *,
        attributor_id: str,
        start_time: datetime,
        end_time: datetime,
        timeout: float,
        headers: Mapping[str, str],
    ) -> FactAttribution: ...


# ---------------------------------------------------------------- reading FACT's result


class _Unreadable(Exception):
    """FACT's result lacks a field or has one of the wrong type."""


_Symptom = tuple[datetime, str, str]  # observed_at (UTC), category, message


@dataclass(frozen=True)
class _Verdict:
    """One verdict as read: its symptoms earliest first."""

    symptoms: tuple[_Symptom, ...]
    probability: float | None


def _field(obj: object, name: str, kind: type | tuple[type, ...]) -> Any:
    value = getattr(obj, name, _Unreadable)
    # bool is an int: never let True stand for a number.
    if value is _Unreadable or not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise _Unreadable(name)
    return value


def _sequence(obj: object, name: str) -> Sequence[Any]:
    value = getattr(obj, name, _Unreadable)
    # Any sequence a generated client may use, but a str is one name, not a sequence of them.
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes, bytearray)):
        raise _Unreadable(name)
    return value


def _probability(obj: object) -> float | None:
    value = getattr(obj, "probability", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Unreadable("probability")
    if not 0 <= value <= 1:
        raise _Unreadable("probability")
    return float(value)


def _probabilities(obj: object) -> list[float]:
    """FACT's probability for one verdict as a list of zero or one, so that repeated verdicts can be merged."""
    probability = _probability(obj)
    return [] if probability is None else [probability]


def _symptoms(obj: object) -> list[_Symptom]:
    read: list[_Symptom] = []
    for symptom in _sequence(obj, "symptoms"):
        observed_at = _field(symptom, "observed_at", datetime)
        if observed_at.utcoffset() is None:
            raise _Unreadable("observed_at")  # a naive time is ambiguous, not UTC by default
        try:
            observed_at = observed_at.astimezone(timezone.utc)
        except OverflowError:
            raise _Unreadable("observed_at") from None
        read.append((observed_at, _field(symptom, "category", str), _field(symptom, "message", str)))
    return read


def _verdict(symptoms: list[_Symptom], probabilities: list[float]) -> _Verdict:
    return _Verdict(tuple(sorted(symptoms, key=lambda s: s[0])), max(probabilities, default=None))


def category_token(categories: Sequence[str]) -> str:
    """The first category (earliest symptom) that normalises to a contract token, else `unknown`."""
    for category in categories:
        token = _NON_TOKEN.sub("_", category.lower()).strip("_")[:64].rstrip("_")
        if token[:1].isalpha():
            return token
    return "unknown"


def _finding(target: NodeTarget | AllJobResources, verdict: _Verdict, fallback: datetime, limit: int) -> Finding:
    symptoms = verdict.symptoms
    return Finding(
        target=target,
        error_category=category_token([category for _, category, _ in symptoms]),
        # A verdict without symptoms has no time of its own: the caller's detection time is the best bound.
        observed_at=symptoms[0][0] if symptoms else fallback,
        evidence=tuple(Evidence("fact", cut_text(message), at) for at, _, message in symptoms[:limit]),
        confidence=verdict.probability,
    )


def translate(result: object, request: AttributionRequest, max_evidence: int) -> AttributionOutcome:
    """FACT's attribution result as the port's outcome; raises ProviderProcessingError for a contract break."""
    symptoms: dict[str, list[_Symptom]] = {}
    probabilities: dict[str, list[float]] = {}
    try:
        attributor_id = _field(result, "attributor_id", str)
        for item in _sequence(result, "faulty_nodes"):
            node = _field(item, "node", str)
            # FACT may name a node twice: one finding carries the symptoms of both.
            symptoms.setdefault(node, []).extend(_symptoms(item))
            probabilities.setdefault(node, []).extend(_probabilities(item))
        analysed = _sequence(result, "analysed_nodes")
        if not all(isinstance(node, str) for node in analysed):
            raise _Unreadable("analysed_nodes")
        job = getattr(result, "job_verdict", _Unreadable)
        if job is _Unreadable:
            raise _Unreadable("job_verdict")
        job_verdict = None if job is None else _verdict(_symptoms(job), _probabilities(job))
        too_little = _field(result, "insufficient_telemetry", bool)
    except _Unreadable as exc:
        log.warning("FACT result unreadable at field %s", exc)
        raise ProviderProcessingError(MSG_UNREADABLE, kind=SourceFailure.MALFORMED) from None
    if not PRINTABLE_ATTRIBUTOR_ID.fullmatch(attributor_id):
        raise ProviderProcessingError(MSG_UNREADABLE, kind=SourceFailure.MALFORMED)

    scope = request.scope.nodes
    if not symptoms.keys() <= frozenset(scope):
        # Dropping the node would hide part of FACT's answer: the whole answer is a contract break.
        raise ProviderProcessingError(MSG_OUT_OF_SCOPE, kind=SourceFailure.MALFORMED)
    detected_at = request.failure_context.detected_at.astimezone(timezone.utc)
    findings = [
        _finding(NodeTarget(node), _verdict(symptoms[node], probabilities[node]), detected_at, max_evidence)
        for node in scope
        if node in symptoms
    ]
    if job_verdict is not None:
        findings.append(_finding(AllJobResources(), job_verdict, detected_at, max_evidence))
    # Healthy nodes FACT analysed beyond the scope are not ours to report; they are left out, not an error.
    healthy = frozenset(analysed) - symptoms.keys()
    error = None
    if too_little or (not analysed and not symptoms and job_verdict is None):
        error = ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, MSG_TOO_LITTLE)
    return AttributionOutcome(
        attributions=tuple(findings),
        unattributed_targets=tuple(NodeTarget(node) for node in scope if node in healthy),
        error=error,
        session_state={"attributor_id": attributor_id},
    )
