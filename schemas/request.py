"""Request schemas: `AttributionRequest` and its parts, with every rule of docs/contract.md."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, validates_schema

from schemas import messages as m
from schemas.base import ContractSchema
from schemas.fields import (
    CanonicalString,
    Choice,
    ContractNested,
    PrintableAscii,
    StrictInteger,
    Token,
    UniqueList,
    UtcDateTime,
)

SCHEMA_VERSION = "0.1.0"
PHASES = ("fast", "slow")
MAX_INT32 = 2147483647
TIMESTAMP_NOTE = (
    "RFC 3339 date-time with an explicit offset (`Z` or `±hh:mm`); a value without an offset is rejected. "
    "Any offset is accepted and converted to UTC; fractional seconds finer than microseconds must be zero."
)


def _describe(text: str, **extra: Any) -> dict[str, Any]:
    return {"description": text, **extra}


class ScopeSchema(ContractSchema):
    nodes = UniqueList(
        CanonicalString(min_length=1, max_length=253),
        max_items=16384,
        required=True,
        metadata=_describe(
            "Node names in scope: unique canonical strings (NFC, no surrounding white space, no control, format, "
            "surrogate, private-use or unassigned character), 1..253 code points. May be empty."
        ),
    )
    ranks = UniqueList(
        StrictInteger(minimum=0, maximum=MAX_INT32),
        max_items=262144,
        required=True,
        metadata=_describe("Ranks in scope: unique integers 0..2147483647. May be empty."),
    )
    start_time = UtcDateTime(
        metadata=_describe("Start of the window (for `slow`, of the epilog window). " + TIMESTAMP_NOTE)
    )
    end_time = UtcDateTime(
        metadata=_describe(
            "End of the window (for `slow`, of the epilog window); later than `start_time` when both are given. "
            + TIMESTAMP_NOTE
        )
    )

    @validates_schema
    def _window_order(self, data: dict[str, Any], **kwargs: Any) -> None:
        start, end = data.get("start_time"), data.get("end_time")
        if start is not None and end is not None and not start < end:
            raise ValidationError(m.TIME_ORDER, field_name="end_time")


class FailureContextSchema(ContractSchema):
    detected_at = UtcDateTime(required=True, metadata=_describe("When the failure was detected. " + TIMESTAMP_NOTE))
    detection_signal = Token(
        required=True,
        metadata=_describe(
            "How the failure was detected, an open token such as `application_error` (not a closed enum).",
            example="application_error",
        ),
    )


class WorkloadContextSchema(ContractSchema):
    workflow_id = CanonicalString(
        min_length=1,
        max_length=256,
        required=True,
        metadata=_describe("The caller's workflow id: a canonical string of 1..256 code points."),
    )
    attempt_index = StrictInteger(
        minimum=0,
        maximum=MAX_INT32,
        required=True,
        metadata=_describe("Which attempt of the workflow this is, 0..2147483647."),
    )


class AttributionRequestSchema(ContractSchema):
    schema_version = Choice(
        (SCHEMA_VERSION,),
        required=True,
        metadata=_describe("Exactly `0.1.0`: there is no version negotiation; deploy matching contract versions."),
    )
    workload_id = CanonicalString(
        min_length=1,
        max_length=256,
        required=True,
        metadata=_describe("The failed workload: a canonical string of 1..256 code points."),
    )
    scope = ContractNested(ScopeSchema, required=True, metadata=_describe("The nodes and ranks in scope."))
    failure_context = ContractNested(
        FailureContextSchema, required=True, metadata=_describe("When and how the failure was detected.")
    )
    timeout_ms = StrictInteger(
        minimum=1,
        maximum=300000,
        required=True,
        metadata=_describe(
            "How long the Adapter waits for the provider, in milliseconds (1..300000). Past it the answer is "
            "200 with `error.type` `timeout`; backend work may go on after that."
        ),
    )
    workload_context = ContractNested(
        WorkloadContextSchema, required=True, metadata=_describe("The workflow and attempt the workload belongs to.")
    )
    phase = Choice(
        PHASES,
        required=True,
        metadata=_describe(
            "`fast` starts the provider's fast signal pass and a new session; `slow` continues a session over the "
            "epilog window `scope.start_time`..`scope.end_time`."
        ),
    )
    continue_session = PrintableAscii(
        min_length=1,
        max_length=1024,
        metadata=_describe(
            "The `attribution_session_id` of an earlier `fast`: required when `phase` is `slow`, rejected when "
            "`fast`. 1..1024 printable ASCII characters."
        ),
    )

    @validates_schema(skip_on_field_errors=False, pass_original=True)
    def _session_rule(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        # Judged on what the caller sent, so an invalid `continue_session` is not also reported as missing.
        sent = isinstance(original, dict) and "continue_session" in original
        phase = data.get("phase")
        if phase == "slow" and not sent:
            raise ValidationError(m.SESSION_REQUIRED, field_name="continue_session")
        if phase == "fast" and sent:
            raise ValidationError(m.SESSION_FORBIDDEN, field_name="continue_session")
