"""Reading the request body as one strict JSON object: every way it can fail is a 422 problem list."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

from schemas.bounds import MAX_LOC_CHARS, MAX_MESSAGE_CHARS, MAX_PROBLEMS, clip
from schemas.messages import MORE_IN_BODY, TOO_MANY_VALUES, MoreProblems, message_type, problems_in

CHUNK = 64 * 1024
DRAIN_SECONDS = 5.0


def drain(environ: Mapping[str, Any], max_bytes: int, seconds: float = DRAIN_SECONDS) -> bool:
    """Read and drop what is left of a refused body, within bounds; True when it was read to its end.

    gunicorn keeps a connection open after a response only when little of the body is left unread, but announces
    keep-alive before it knows: a client reusing the connection after a 413 would then find it closed. Reading the
    rest here (up to `max_bytes`, for at most `seconds`) keeps the connection usable and the 413 readable.
    """
    stream = environ.get("wsgi.input")
    if stream is None:
        return True
    deadline = time.monotonic() + seconds
    drained = 0
    while drained < max_bytes and time.monotonic() < deadline:
        try:
            chunk = stream.read(CHUNK)
        except (OSError, ValueError):
            return False
        if not chunk:
            return True
        drained += len(chunk)
    return False


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
    """The body's `,` `:` `[` `{` and backslashes, in order: what `within_bounds` and `has_duplicate_keys` count."""
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
    """The raw body, at most `max_content_length` bytes: past it RequestEntityTooLarge (413), never a cut body.

    With a Content-Length, werkzeug refuses an oversized body before reading it. A chunked body has no length:
    werkzeug's own limit stops reading at the limit without saying so, so it is read here, one byte past the limit.
    """
    limit = request.max_content_length
    stream = request.environ.get("wsgi.input")
    if type(stream) is HeldBody and stream.tell() == 0:
        if limit is not None and len(stream.whole) > limit:
            raise RequestEntityTooLarge()
        stream.seek(0, io.SEEK_END)
        return stream.whole
    if request.content_length is not None or limit is None or not request.environ.get("wsgi.input_terminated"):
        return request.get_data(cache=False)
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = stream.read(min(CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLarge()


def read_json_object(request: Request) -> dict[str, Any]:
    """The body as a dict; RequestValidationError for a wrong content type, bad UTF-8, bad JSON or a non-object.

    Reading is bounded by the app's MAX_CONTENT_LENGTH (413 past it), before any check of the content.
    """
    return parse_json_object(read_json_body(request))


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


# Every JSON string, a key when a colon follows it. Outside strings valid JSON has no quote, so scanning from the
# start finds each string whole: a quote inside a string is always escaped.
_STRING_OR_KEY = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"([ \t\n\r]*:)?')


def parse_fast(raw: bytes) -> Any:
    """`raw` parsed by orjson, or None when orjson refuses it (the strict reader then says why).

    orjson keeps the last of two equal keys without saying so: `has_duplicate_keys` tells the two apart.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def key_count(raw: bytes) -> int:
    """How many object keys the valid JSON text `raw` holds, duplicates included."""
    marks = _STRING_OR_KEY.findall(raw)
    return len(marks) - marks.count(b"")


def has_duplicate_keys(raw: bytes, marks: bytes, parsed_keys: int, string_colons: int) -> bool:
    """True when the JSON text `raw` holds more object keys than the `parsed_keys` its parsed objects kept.

    Each colon of the text is either a key's or inside a string, so without escapes the text's colons are the keys
    plus the colons of the parsed strings (`string_colons`): a dropped duplicate adds at least its own colon. An
    escape (`\\u003a` is a colon) makes that count unsure: the text's keys are then counted one by one.
    """
    if b"\\" in marks:
        return key_count(raw) != parsed_keys
    return marks.count(b":") != parsed_keys + string_colons
