"""Custom marshmallow fields for the contract's strict types.

Each field validates exactly what it publishes: `json_schema()` gives the OpenAPI properties (type, bounds,
pattern) from the same parameters that `_deserialize` enforces.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from marshmallow import ValidationError, fields

from schemas import messages as m
from schemas.bounds import MAX_PROBLEMS_PER_FIELD

_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PRINTABLE_ASCII_TRIMMED = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,18}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_RFC3339_NO_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?")


class ContractField(fields.Field):
    """Base: a missing value, a null and a wrong JSON type each give one typed message."""

    type_message: m.TypedMessage = m.STRING_TYPE

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_messages.update({"required": m.MISSING, "null": self.type_message})

    def json_schema(self) -> dict[str, Any]:
        return {}

    def all_valid(self, values: list[Any]) -> bool:
        """True only when every value is certainly valid: a fast path for long arrays, never a looser check."""
        return False

    def load_item(self, value: Any) -> tuple[Any, list[str] | None]:
        """One array item: (loaded value, None), or (None, its messages); never raises ValidationError."""
        if value is None:
            return None, [self.type_message]
        try:
            return self._deserialize(value, None, None), None
        except ValidationError as exc:
            return None, exc.messages if isinstance(exc.messages, list) else [str(exc.messages)]

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


def check_canonical(value: str) -> None:
    """Raise ValidationError unless `value` is a canonical string (see docs/contract.md)."""
    if value != value.strip():
        raise ValidationError(m.NOT_CANONICAL_SPACE)
    if value.isascii():
        if _ASCII_CONTROL.search(value):
            raise ValidationError(m.NOT_CANONICAL_CHAR)
        return
    for char in value:
        if unicodedata.category(char) in _FORBIDDEN_CATEGORIES:
            raise ValidationError(m.NOT_CANONICAL_CHAR)
    if not unicodedata.is_normalized("NFC", value):
        raise ValidationError(m.NOT_CANONICAL_NFC)


class BoundedString(ContractField):
    """A JSON string of `min_length`..`max_length` code points."""

    def __init__(self, *, min_length: int = 0, max_length: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.min_length = min_length
        self.max_length = max_length

    def check(self, value: str) -> None:
        """Further rules of a subclass."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise ValidationError(self.type_message)
        if len(value) < self.min_length:
            raise ValidationError(m.STRING_TOO_SHORT.format(min=self.min_length))
        if self.max_length is not None and len(value) > self.max_length:
            raise ValidationError(m.STRING_TOO_LONG.format(max=self.max_length))
        self.check(value)
        return value

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        return schema


class CanonicalString(BoundedString):
    """NFC, no surrounding white space, no Cc/Cf/Cs/Co/Cn character; length in code points."""

    def check(self, value: str) -> None:
        check_canonical(value)

    def all_valid(self, values: list[Any]) -> bool:
        # Printable ASCII with no surrounding space is canonical; anything else takes the full per-item check.
        high = self.max_length if self.max_length is not None else float("inf")
        return all(
            type(v) is str and self.min_length <= len(v) <= high and _PRINTABLE_ASCII_TRIMMED.fullmatch(v)
            for v in values
        )


class PrintableAscii(BoundedString):
    """Printable ASCII only (space to tilde)."""

    PATTERN = r"^[\x20-\x7e]+$"
    _re = re.compile(r"[\x20-\x7e]*")

    def check(self, value: str) -> None:
        if not self._re.fullmatch(value):
            raise ValidationError(m.NOT_PRINTABLE_ASCII)

    def json_schema(self) -> dict[str, Any]:
        return {**super().json_schema(), "pattern": self.PATTERN}


class Token(BoundedString):
    """A lower-case token such as `application_error`; an open set, not an enum."""

    PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
    _re = re.compile(r"[a-z][a-z0-9_]{0,63}")

    def check(self, value: str) -> None:
        if not self._re.fullmatch(value):
            raise ValidationError(m.PATTERN.format(pattern=self.PATTERN))

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": self.PATTERN}


class Choice(ContractField):
    """One of a fixed set of strings (a JSON Schema `enum`)."""

    def __init__(self, choices: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.choices = choices

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise ValidationError(self.type_message)
        if value not in self.choices:
            expected = " or ".join(repr(choice) for choice in self.choices)
            raise ValidationError(m.LITERAL.format(expected=expected))
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return getattr(value, "value", value)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}


class StrictInteger(ContractField):
    """A JSON integer: never a string, a bool or a number with a fraction (`1.0` included)."""

    type_message = m.INT_TYPE

    def __init__(self, *, minimum: int, maximum: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.minimum = minimum
        self.maximum = maximum
        self._too_small = m.GREATER_EQUAL.format(min=minimum)
        self._too_large = m.LESS_EQUAL.format(max=maximum)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        if type(value) is not int:
            raise ValidationError(m.INT_TYPE)
        if value < self.minimum:
            raise ValidationError(m.GREATER_EQUAL.format(min=self.minimum))
        if value > self.maximum:
            raise ValidationError(m.LESS_EQUAL.format(max=self.maximum))
        return value

    def load_item(self, value: Any) -> tuple[Any, list[str] | None]:
        # The checks of _deserialize without raising: an array can hold 262144 bad items.
        if type(value) is not int:
            return None, [m.INT_TYPE]
        if value < self.minimum:
            return None, [self._too_small]
        if value > self.maximum:
            return None, [self._too_large]
        return value, None

    def all_valid(self, values: list[Any]) -> bool:
        return all(type(v) is int for v in values) and (
            not values or (self.minimum <= min(values) and max(values) <= self.maximum)
        )

    def json_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}


class BoundedNumber(ContractField):
    """A finite JSON number in [minimum, maximum] (response side: `confidence`)."""

    type_message = m.NUMBER_TYPE

    def __init__(self, *, minimum: float, maximum: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.minimum = minimum
        self.maximum = maximum

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> float:
        if type(value) not in (int, float) or value != value or value in (float("inf"), float("-inf")):
            raise ValidationError(m.NUMBER_TYPE)
        if value < self.minimum:
            raise ValidationError(m.GREATER_EQUAL.format(min=self.minimum))
        if value > self.maximum:
            raise ValidationError(m.LESS_EQUAL.format(max=self.maximum))
        return float(value)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "number", "minimum": self.minimum, "maximum": self.maximum}


# The shape nearly every caller sends: ASCII digits, `T`, a time of day up to 23:59:59, at most microseconds, `Z` or
# an offset up to 23:59.
# Within it the C reader `datetime.fromisoformat` reads exactly what `_parse_strictly` reads (a property test holds
# them equal); a leap second, a bad date or an instant past the calendar's ends falls through to the strict reading,
# which says which rule is broken.
_RFC3339_COMMON = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)


def parse_timestamp(value: str) -> datetime:
    """RFC 3339 date-time with an explicit offset -> aware UTC datetime, or ValidationError."""
    if _RFC3339_COMMON.fullmatch(value) is not None:
        try:
            return datetime.fromisoformat(value).astimezone(timezone.utc)
        except (ValueError, OverflowError):
            pass
    return _parse_strictly(value)


def _parse_strictly(value: str) -> datetime:
    """`parse_timestamp` by the contract's rules alone, each broken rule with its own message."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValidationError(m.DATETIME_NAIVE if _RFC3339_NO_OFFSET.fullmatch(value) else m.DATETIME_TYPE)
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    fraction = fraction or ""
    if second == "60":
        raise ValidationError(m.DATETIME_LEAP_SECOND)
    if fraction[6:].strip("0"):
        raise ValidationError(m.DATETIME_PRECISION)
    microsecond = int(fraction[:6].ljust(6, "0"))
    try:
        if zulu:
            offset = timezone.utc
        else:
            if int(off_h) > 23 or int(off_m) > 59:
                raise ValueError("offset out of range")
            delta = timedelta(hours=int(off_h), minutes=int(off_m))
            offset = timezone(-delta if sign == "-" else delta)
        parsed = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), microsecond, tzinfo=offset
        )
    except ValueError as exc:
        raise ValidationError(m.DATETIME_TYPE) from exc
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError as exc:
        raise ValidationError(m.DATETIME_RANGE) from exc


def format_timestamp(value: datetime) -> str:
    """An aware datetime as RFC 3339 in UTC ending in `Z`."""
    if value.tzinfo is None:
        raise ValueError("naive datetime cannot be emitted")
    text = value.astimezone(timezone.utc).isoformat()
    return text.removesuffix("+00:00") + "Z"


class UtcDateTime(ContractField):
    """RFC 3339 date-time with an explicit offset; any offset is accepted, converted to UTC, emitted with `Z`."""

    type_message = m.DATETIME_TYPE

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> datetime:
        if not isinstance(value, str):
            raise ValidationError(m.DATETIME_TYPE)
        return parse_timestamp(value)

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else format_timestamp(value)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "format": "date-time"}


class UniqueList(fields.List):
    """An array of at most `max_items` unique items; the length is checked before any item is read."""

    def __init__(self, inner: ContractField, *, max_items: int, **kwargs: Any) -> None:
        super().__init__(inner, **kwargs)
        self.max_items = max_items
        self.error_messages.update({"required": m.MISSING, "null": m.LIST_TYPE, "invalid": m.LIST_TYPE})

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> list:
        if not isinstance(value, list):
            raise ValidationError(m.LIST_TYPE)
        if len(value) > self.max_items:
            raise ValidationError(m.LIST_TOO_LONG.format(max=self.max_items))
        if self.inner.all_valid(value) and len(set(value)) == len(value):
            return list(value)
        load_item: Callable[[Any], tuple[Any, list[str] | None]] = self.inner.load_item
        result: list[Any] = []
        # The first MAX_PROBLEMS_PER_FIELD bad items are listed; the others are only counted.
        errors: dict[int | str, list[str]] = {}
        bad = 0
        first_index: dict[Any, int] = {}
        for index, item in enumerate(value):
            loaded, messages = load_item(item)
            if messages is None:
                first = first_index.setdefault(loaded, index)
                if first == index:
                    result.append(loaded)
                    continue
            if bad < MAX_PROBLEMS_PER_FIELD:
                errors[index] = messages or [m.DUPLICATE_ITEM.format(first=first)]
            bad += 1
        if bad > MAX_PROBLEMS_PER_FIELD:
            errors["_schema"] = [m.MoreProblems(m.MORE_IN_FIELD, bad - MAX_PROBLEMS_PER_FIELD)]
        if errors:
            raise ValidationError(errors)
        return result

    def json_schema(self) -> dict[str, Any]:
        return {"maxItems": self.max_items, "uniqueItems": True}


class ContractNested(fields.Nested):
    """A nested object whose missing/null messages are typed like every other field's."""

    def __init__(self, nested: Any, **kwargs: Any) -> None:
        super().__init__(nested, **kwargs)
        self.error_messages.update({"required": m.MISSING, "null": m.OBJECT_TYPE, "type": m.OBJECT_TYPE})


class ContractList(fields.List):
    """A plain (response-side) array with a published item bound."""

    def __init__(self, inner: Any, *, max_items: int | None = None, **kwargs: Any) -> None:
        super().__init__(inner, **kwargs)
        self.max_items = max_items
        self.error_messages.update({"required": m.MISSING, "null": m.LIST_TYPE, "invalid": m.LIST_TYPE})

    def json_schema(self) -> dict[str, Any]:
        return {} if self.max_items is None else {"maxItems": self.max_items}
