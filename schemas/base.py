"""The schema base class: unknown fields and non-object input give typed messages."""

from marshmallow import RAISE, Schema

from schemas import messages as m


class ContractSchema(Schema):
    """Unknown fields at any depth are rejected (there is no version negotiation)."""

    class Meta:
        unknown = RAISE

    error_messages = {"unknown": m.UNKNOWN_FIELD, "type": m.OBJECT_TYPE}
