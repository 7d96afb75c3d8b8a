"""Response schemas: `AttributionResponse`, its findings and targets, and the error bodies (422, 413, 404, 405, 500)."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, validates_schema

from schemas import messages as m
from schemas.base import ContractSchema
from schemas.fields import (
    BoundedNumber,
    BoundedString,
    CanonicalString,
    Choice,
    ContractField,
    ContractList,
    ContractNested,
    PrintableAscii,
    Token,
    UtcDateTime,
)
from schemas.request import SCHEMA_VERSION

SERVICE_NAME = "attribution-adapter"
ERROR_TYPES = ("timeout", "insufficient_telemetry", "service_error", "no_attribution_available")
TARGET_TYPES = ("Node", "AllJobResources")
MAX_EVIDENCE = 32
MAX_EVIDENCE_MESSAGE = 4096
MAX_ERROR_MESSAGE = 512


class TargetSchema(ContractSchema):
    """One schema for both target kinds; OpenAPI publishes it as a `oneOf` with a discriminator on `type`."""

    type = Choice(TARGET_TYPES, required=True)
    name = CanonicalString(min_length=1, max_length=253)

    @validates_schema
    def _name_rule(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("type") == "Node" and "name" not in data:
            raise ValidationError(m.TARGET_NAME_REQUIRED, field_name="name")
        if data.get("type") == "AllJobResources" and "name" in data:
            raise ValidationError(m.TARGET_NAME_FORBIDDEN, field_name="name")


# One instance for every target: building a schema per value made dumping a large answer several times slower.
_target_schema = TargetSchema()


class TargetField(ContractField):
    """A `Target` value, loaded and dumped through TargetSchema, published as a `$ref` to the `Target` union."""

    type_message = m.OBJECT_TYPE
    COMPONENT = "Target"

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        return _target_schema.load(value)

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else _target_schema.dump(value)

    def json_schema(self) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{self.COMPONENT}"}


class EvidenceSchema(ContractSchema):
    source = Token(required=True, metadata={"description": "Where the evidence comes from, a token such as `syslog`."})
    message = BoundedString(
        max_length=MAX_EVIDENCE_MESSAGE,
        required=True,
        metadata={"description": "The evidence text; longer text is cut to 4096 characters ending in `…`."},
    )
    observed_at = UtcDateTime(metadata={"description": "When the evidence was observed, in UTC."})


class FindingSchema(ContractSchema):
    target = TargetField(required=True, metadata={"description": "The node, or the job's resources as a whole."})
    error_category = Token(
        required=True, metadata={"description": "The kind of failure, an open token such as `gpu_hardware`."}
    )
    observed_at = UtcDateTime(required=True, metadata={"description": "When the failure was first observed, in UTC."})
    evidence = ContractList(
        ContractNested(EvidenceSchema),
        max_items=MAX_EVIDENCE,
        required=True,
        metadata={"description": "The evidence the finding rests on (may be empty, at most 32 items)."},
    )
    confidence = BoundedNumber(
        minimum=0,
        maximum=1,
        metadata={"description": 'The provider\'s confidence, 0..1. Absent means unknown, never "low".'},
    )


class ErrorInfoSchema(ContractSchema):
    type = Choice(
        ERROR_TYPES,
        required=True,
        metadata={
            "description": (
                "`insufficient_telemetry` is informational and findings may stand beside it; with any other type "
                "`attributions` is empty. These are response data, not HTTP status codes."
            )
        },
    )
    message = BoundedString(
        min_length=1,
        max_length=MAX_ERROR_MESSAGE,
        required=True,
        metadata={"description": "A short human sentence: no stack trace, credential or log excerpt."},
    )


class ServiceSchema(ContractSchema):
    name = Choice((SERVICE_NAME,), required=True, metadata={"description": "Always `attribution-adapter`."})
    version = BoundedString(min_length=1, max_length=64, required=True, metadata={"description": "Adapter version."})
    provider = BoundedString(
        min_length=1, max_length=256, required=True, metadata={"description": "The provider that answered."}
    )


class AttributionResponseSchema(ContractSchema):
    schema_version = Choice((SCHEMA_VERSION,), required=True, metadata={"description": "Always `0.1.0`."})
    service = ContractNested(
        ServiceSchema, required=True, metadata={"description": "The Adapter's name and version, and its provider."}
    )
    request_id = PrintableAscii(
        min_length=1,
        max_length=128,
        required=True,
        metadata={"description": "Unique per request; also sent as the `X-Request-ID` header."},
    )
    attribution_session_id = PrintableAscii(
        min_length=1,
        max_length=1024,
        required=True,
        allow_none=True,
        metadata={
            "description": (
                "Opaque. For `fast` a new session; for `slow` the `continue_session` given; null only when no "
                "session exists. It carries no secret and is not a credential."
            )
        },
    )
    attributions = ContractList(
        ContractNested(FindingSchema),
        required=True,
        metadata={"description": "Findings; may be empty. An empty list says nothing about node isolation."},
    )
    unattributed_targets = ContractList(
        TargetField(),
        required=True,
        metadata={"description": "Targets in scope that were looked at and got no finding."},
    )
    error = ContractNested(
        ErrorInfoSchema, metadata={"description": "Present only when there is one; callers must read it."}
    )


class LocItem(ContractField):
    """One step of a 422 `loc` path: a field name or an array index."""

    def json_schema(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "string"}, {"type": "integer"}]}


class ValidationProblemSchema(ContractSchema):
    loc = ContractList(
        LocItem(),
        required=True,
        metadata={"description": 'Path to the problem, e.g. ["body", "scope", "nodes", 3].'},
    )
    msg = BoundedString(required=True, metadata={"description": "What is wrong, for a person."})
    type = BoundedString(required=True, metadata={"description": "A machine-readable error type, e.g. `int_type`."})


class ValidationErrorSchema(ContractSchema):
    """The 422 body: one entry per problem (bounded, see docs/contract.md), the shape FastAPI callers already parse."""

    detail = ContractList(
        ContractNested(ValidationProblemSchema),
        required=True,
        metadata={
            "description": (
                "One entry per problem found in the request, at most 16 per array or object and 64 in all; an entry "
                "of type `too_many_errors` says how many more were found and are not listed."
            )
        },
    )


class ErrorDetailSchema(ContractSchema):
    """The 404, 405, 413 and 500 body."""

    detail = BoundedString(required=True, metadata={"description": "What went wrong, for a person."})
