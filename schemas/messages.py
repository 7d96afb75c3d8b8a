"""Validation messages that carry their 422 `type` token, so every problem maps to one `{loc, msg, type}` entry."""

from __future__ import annotations

from typing import Any


class TypedMessage(str):
    """A message string that also knows its machine-readable error type.

    marshmallow stores messages as given, so the type survives until the 422 body is built.
    """

    error_type: str

    def __new__(cls, text: str, error_type: str) -> TypedMessage:
        message = super().__new__(cls, text)
        message.error_type = error_type
        return message

    def format(self, *args: Any, **kwargs: Any) -> TypedMessage:  # marshmallow formats field messages
        return TypedMessage(str.format(self, *args, **kwargs), self.error_type)


def message_type(message: object) -> str:
    return getattr(message, "error_type", "value_error")


MISSING = TypedMessage("Field required", "missing")
UNKNOWN_FIELD = TypedMessage("Extra inputs are not permitted", "extra_forbidden")
OBJECT_TYPE = TypedMessage("Input should be a JSON object", "dict_type")
STRING_TYPE = TypedMessage("Input should be a valid string", "string_type")
INT_TYPE = TypedMessage("Input should be a valid integer", "int_type")
NUMBER_TYPE = TypedMessage("Input should be a finite number", "float_type")
LIST_TYPE = TypedMessage("Input should be a valid array", "list_type")
DATETIME_TYPE = TypedMessage(
    "Input should be an RFC 3339 date-time with an offset, e.g. 2026-09-09T12:00:00Z", "datetime_parsing"
)
DATETIME_NAIVE = TypedMessage("Input should have a time zone offset (Z or ±hh:mm)", "timezone_aware")
DATETIME_RANGE = TypedMessage("Date-time is out of range", "datetime_parsing")
DATETIME_LEAP_SECOND = TypedMessage(
    "Leap seconds (:60) cannot be represented; send :59.999999 or :00", "datetime_parsing"
)
DATETIME_PRECISION = TypedMessage("Fractional seconds finer than microseconds must be zero", "datetime_parsing")
NOT_CANONICAL_NFC = TypedMessage("String must be in Unicode NFC form", "string_not_canonical")
NOT_CANONICAL_SPACE = TypedMessage("String must not start or end with white space", "string_not_canonical")
NOT_CANONICAL_CHAR = TypedMessage(
    "String must not contain control, format, surrogate, private-use or unassigned characters",
    "string_not_canonical",
)
NOT_PRINTABLE_ASCII = TypedMessage("String must contain printable ASCII characters only", "string_pattern_mismatch")
STRING_TOO_SHORT = TypedMessage("String should have at least {min} characters", "string_too_short")
STRING_TOO_LONG = TypedMessage("String should have at most {max} characters", "string_too_long")
PATTERN = TypedMessage("String should match pattern '{pattern}'", "string_pattern_mismatch")
LITERAL = TypedMessage("Input should be {expected}", "literal_error")
LIST_TOO_LONG = TypedMessage("Array should have at most {max} items", "too_long")
DUPLICATE_ITEM = TypedMessage("Array items must be unique; this one repeats item {first}", "unique_items")
GREATER_EQUAL = TypedMessage("Input should be greater than or equal to {min}", "greater_than_equal")
LESS_EQUAL = TypedMessage("Input should be less than or equal to {max}", "less_than_equal")
TIME_ORDER = TypedMessage("start_time must be earlier than end_time", "value_error")
SESSION_REQUIRED = TypedMessage("continue_session is required when phase is 'slow'", "missing")
SESSION_FORBIDDEN = TypedMessage("continue_session is not allowed when phase is 'fast'", "extra_forbidden")
TARGET_NAME_REQUIRED = TypedMessage("A Node target requires name", "missing")
TARGET_NAME_FORBIDDEN = TypedMessage("An AllJobResources target has no name", "extra_forbidden")
MORE_IN_FIELD = TypedMessage("{count} more problems at this location were found and are not listed", "too_many_errors")
MORE_IN_BODY = TypedMessage("{count} more problems were found and are not listed", "too_many_errors")
TOO_MANY_VALUES = TypedMessage(
    "The body holds more than {max_values} JSON values, {max_strings} strings, {max_members} object members or "
    "{max_containers} objects and arrays; no valid request holds that many",
    "too_many_values",
)


class MoreProblems(TypedMessage):
    """A summary entry standing for `count` problems that are not listed one by one."""

    count: int

    def __new__(cls, template: TypedMessage, count: int) -> MoreProblems:
        message = super().__new__(cls, str.format(template, count=count), template.error_type)
        message.count = count
        return message


def problems_in(message: object) -> int:
    """How many problems one message stands for: its count for a summary, else one."""
    return message.count if isinstance(message, MoreProblems) else 1
