"""Reading and loading the request body: one way through, from the bytes to the loaded request, every way it can
fail a 422 problem list.

`load_request` counts the body's structure once, then takes the first of three readers that is certain: orjson and
the bulk pre-check (`schemas/fast.py`) for a valid request; else the strict reader here and the pre-check on what
it read; else the schema, which reports every problem.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from typing import Any

from flask import Request
from marshmallow import ValidationError
from werkzeug.exceptions import RequestEntityTooLarge

from schemas.bounds import MAX_LOC_CHARS, MAX_MESSAGE_CHARS, MAX_PROBLEMS, clip
from schemas.fast import fast_load, fast_load_text
from schemas.messages import MORE_IN_BODY, TOO_MANY_VALUES, MoreProblems, message_type, problems_in
from schemas.request import AttributionRequestSchema

_request_schema = AttributionRequestSchema()


class RequestValidationError(Exception):
    """The request breaks the contract; `problems` is the 422 `detail` list, `total` how many problems were found."""

    def __init__(self, problems: list[dict[str, Any]], total: int | None = None) -> None:
        self.total = len(problems) if total is None else total
        super().__init__(f"{self.total} validation problem(s)")
        self.problems = problems


def problem(loc: list[Any], msg: str, kind: str) -> dict[str, Any]:
    """One `{loc, msg, type}` entry, its texts bounded: a `loc` step can be a key the caller sent."""
    steps = [clip(step, MAX_LOC_CHARS) if isinstance(step, str) else step for step in loc]
    return {"loc": steps, "msg": clip(msg, MAX_MESSAGE_CHARS), "type": kind}


def _entries(messages: Any, loc: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """marshmallow's nested error messages as (loc, message) pairs, in input order."""
    if isinstance(messages, dict):
        for key, value in messages.items():
            yield from _entries(value, loc if key == "_schema" else (*loc, key))
    elif isinstance(messages, list):
        for message in messages:
            if isinstance(message, (dict, list)):
                yield from _entries(message, loc)
            else:
                yield loc, message
    else:
        yield loc, messages


def validation_error(messages: Any, loc: tuple[Any, ...] = ("body",)) -> RequestValidationError:
    """The 422 for marshmallow's messages: at most MAX_PROBLEMS entries, then one saying how many more were found.

    A summary entry of a field stands for the problems it counts; those that do not fit are counted in the final one.
    """
    problems: list[dict[str, Any]] = []
    total = 0
    unlisted = 0
    for where, message in _entries(messages, loc):
        count = problems_in(message)
        total += count
        if len(problems) < MAX_PROBLEMS:
            problems.append(problem(list(where), str(message), message_type(message)))
        else:
            unlisted += count
    if unlisted:
        problems.append(problem(list(loc), str(MoreProblems(MORE_IN_BODY, unlisted)), MORE_IN_BODY.error_type))
    return RequestValidationError(problems, total)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Keeping one of two values would silently drop what the caller sent.
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# The most a valid request holds: every node and rank, a few more values, 16 object members and seven objects and
# arrays. A body with far more is refused before it is parsed: parsing it could take many times its size in memory
# (an empty JSON object costs three bytes of body and 64 of memory, an object member over a hundred), and every value
# could be one more problem.
MAX_VALUES = 16384 + 262144 + 1024
MAX_CONTAINERS = 1024
MAX_MEMBERS = 1024  # keys of all objects together: a valid request has 16 at most
MAX_STRINGS = 16384 + 1024  # keys and string values: a valid request has its nodes and 26 more at most
# A JSON string, or the rest of the text after an unterminated one: every match ends where the next may start, so
# one pass over the body, whatever it holds.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)


# Every byte but `,` `:` `[` `{` and the backslash: deleting these leaves the marks counted below, in one pass.
_NOT_A_MARK = bytes(c for c in range(256) if c not in b",:[{\\")


def structure_marks(raw: bytes) -> bytes:
    """The body's `,` `:` `[` `{` and backslashes, in order: what `within_bounds` and `schemas.fast.has_duplicate_keys`
    count."""
    return raw.translate(None, _NOT_A_MARK)


def within_bounds(marks: bytes) -> bool:
    """True when even counting the marks inside strings, the body holds no more JSON values, object members or
    containers than a valid request can: parsing it cannot take more memory than the largest valid request."""
    containers = marks.count(b"[") + marks.count(b"{")
    return (
        containers <= MAX_CONTAINERS
        and marks.count(b":") <= MAX_MEMBERS
        and marks.count(b",") + containers + 1 <= MAX_VALUES
    )


def _too_many_values(raw: bytes, marks: bytes | None = None) -> bool:
    """True when the body holds more JSON values, strings, object members or containers than any valid request.

    Counting `,` `:` `[` `{` in the raw bytes (`marks`, when the caller has them already) is fast and never counts
    too few; only when it passes a bound are the strings (which may hold those characters) taken out and the count
    made again.
    """
    if within_bounds(structure_marks(raw) if marks is None else marks):
        return False
    # Stopping after MAX_STRINGS + 1 strings bounds the work and the pieces `subn` collects.
    stripped, strings = _STRING.subn(b'""', raw, count=MAX_STRINGS + 1)
    return strings > MAX_STRINGS or not within_bounds(structure_marks(stripped))


class HeldBody(io.BytesIO):
    """A request body the server has already read whole, as `wsgi.input` (app/worker.py): `read_body` takes the
    bytes as they are, without reading them through a stream again."""

    def __init__(self, body: bytes) -> None:
        super().__init__(body)
        self.whole = body


def read_body(request: Request) -> bytes:
    """The raw body, at most `max_content_length` bytes: past it RequestEntityTooLarge (413).

    The Adapter's worker hands every body over whole, with its Content-Length (app/worker.py): it is taken as it
    is. Any other body (the test client's) is read by werkzeug, which refuses a Content-Length over the limit
    before reading.
    """
    stream = request.environ.get("wsgi.input")
    if type(stream) is HeldBody and stream.tell() == 0:
        limit = request.max_content_length
        if limit is not None and len(stream.whole) > limit:
            raise RequestEntityTooLarge()
        stream.seek(0, io.SEEK_END)
        return stream.whole
    return request.get_data(cache=False)


def read_json_body(request: Request) -> bytes:
    """The raw body (bounded as by `read_body`) once the Content-Type says UTF-8 JSON; else RequestValidationError."""
    raw = read_body(request)
    if request.mimetype != "application/json":
        raise RequestValidationError(
            [problem(["header", "content-type"], "Content-Type must be application/json", "content_type")]
        )
    charset = request.mimetype_params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise RequestValidationError(
            [problem(["header", "content-type"], "The JSON body must be encoded as UTF-8", "content_type")]
        )
    return raw


def parse_json_object(raw: bytes, marks: bytes | None = None) -> dict[str, Any]:
    """The body as a dict; RequestValidationError for bad UTF-8, bad JSON, a duplicate key or a non-object.
    `marks`: the body's `structure_marks`, when the caller counted them already."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestValidationError(
            [problem(["body"], f"Body is not valid UTF-8 (byte {exc.start})", "json_invalid")]
        ) from None
    if _too_many_values(raw, marks):
        raise RequestValidationError(
            [
                problem(
                    ["body"],
                    TOO_MANY_VALUES.format(
                        max_values=MAX_VALUES,
                        max_strings=MAX_STRINGS,
                        max_members=MAX_MEMBERS,
                        max_containers=MAX_CONTAINERS,
                    ),
                    TOO_MANY_VALUES.error_type,
                )
            ]
        )
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as exc:
        raise RequestValidationError(
            [problem(["body"], f"JSON object has a duplicate key {exc.args[0]!r}", "json_invalid")]
        ) from None
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [problem(["body"], f"JSON decode error: {exc.msg} (line {exc.lineno}, column {exc.colno})", "json_invalid")]
        ) from None
    except ValueError as exc:
        raise RequestValidationError([problem(["body"], f"JSON decode error: {exc}", "json_invalid")]) from None
    except RecursionError:
        raise RequestValidationError([problem(["body"], "JSON is nested too deeply", "json_invalid")]) from None
    if not isinstance(data, dict):
        raise RequestValidationError([problem(["body"], "Input should be a JSON object", "dict_type")])
    return data


def load_request(raw: bytes) -> dict[str, Any]:
    """The request body loaded, or RequestValidationError with every problem (a 422).

    A body within the value bounds is parsed by orjson and a valid request checked in bulk; anything else (bad
    JSON, a duplicate key, too many values, any doubt about a value) is read by the strict reader and loaded
    through the schema, which reports it.
    """
    marks = structure_marks(raw)  # counted once, for the bounds of both readers
    data = fast_load_text(raw, marks) if within_bounds(marks) else None
    if data is not None:
        return data
    payload = parse_json_object(raw, marks)
    data = fast_load(payload)  # a valid body orjson could not take (commas inside names past the value bound)
    if data is not None:
        return data
    try:
        return _request_schema.load(payload)
    except ValidationError as exc:
        raise validation_error(exc.messages) from None
