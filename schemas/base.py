"""The schema base class: unknown fields and non-object input give typed messages."""

from collections.abc import Mapping
from typing import Any

from marshmallow import EXCLUDE, RAISE, Schema

from schemas import messages as m
from schemas.bounds import MAX_PROBLEMS_PER_FIELD


class ContractSchema(Schema):
    """Unknown fields at any depth are rejected (there is no version negotiation).

    They are reported here rather than by marshmallow, which stores one error per unknown key: an object with
    hundreds of thousands of keys gives the first MAX_PROBLEMS_PER_FIELD of them, in input order, and a count.
    """

    class Meta:
        unknown = RAISE

    error_messages = {"unknown": m.UNKNOWN_FIELD, "type": m.OBJECT_TYPE}

    def _deserialize(self, data: Any, *, error_store: Any, unknown: Any = RAISE, **kwargs: Any) -> Any:
        result = super()._deserialize(data, error_store=error_store, unknown=EXCLUDE, **kwargs)
        if unknown == RAISE and isinstance(data, Mapping) and not kwargs.get("many"):
            known = {field.data_key or name for name, field in self.load_fields.items()}
            extra = 0
            for key in data:
                if key in known:
                    continue
                if extra < MAX_PROBLEMS_PER_FIELD:
                    error_store.store_error([self.error_messages["unknown"]], key)
                extra += 1
            if extra > MAX_PROBLEMS_PER_FIELD:
                error_store.store_error([m.MoreProblems(m.MORE_IN_FIELD, extra - MAX_PROBLEMS_PER_FIELD)])
        return result
