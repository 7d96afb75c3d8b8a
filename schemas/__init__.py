"""marshmallow schemas for every public shape of the Attribution Adapter contract."""

from schemas.request import AttributionRequestSchema, FailureContextSchema, ScopeSchema, WorkloadContextSchema
from schemas.response import (
    AttributionResponseSchema,
    ErrorDetailSchema,
    ErrorInfoSchema,
    EvidenceSchema,
    FindingSchema,
    ServiceSchema,
    TargetSchema,
    ValidationErrorSchema,
    ValidationProblemSchema,
)

__all__ = [
    "AttributionRequestSchema",
    "AttributionResponseSchema",
    "ErrorDetailSchema",
    "ErrorInfoSchema",
    "EvidenceSchema",
    "FailureContextSchema",
    "FindingSchema",
    "ScopeSchema",
    "ServiceSchema",
    "TargetSchema",
    "ValidationErrorSchema",
    "ValidationProblemSchema",
    "WorkloadContextSchema",
]
