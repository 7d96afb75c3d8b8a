"""Reading the request body as one strict JSON object: every way it can fail is a 422 problem list."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

import orjson
from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

from schemas.messages import message_type

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
    """The request breaks the contract; `problems` is the 422 `detail` list."""

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(problems)} validation problem(s)")
        self.problems = problems


def problem(loc: list[Any], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


def flatten(messages: Any, loc: tuple[Any, ...] = ("body",)) -> list[dict[str, Any]]:
    """marshmallow's nested error messages as `{loc, msg, type}` entries, one per problem, in input order."""
    problems: list[dict[str, Any]] = []
    if isinstance(messages, dict):
        for key, value in messages.items():
            problems.extend(flatten(value, loc if key == "_schema" else (*loc, key)))
    elif isinstance(messages, list):
        for message in messages:
            if isinstance(message, (dict, list)):
                problems.extend(flatten(message, loc))
            else:
                problems.append(problem(list(loc), str(message), message_type(message)))
    else:
        problems.append(problem(list(loc), str(messages), message_type(messages)))
    return problems


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


def read_body(request: Request) -> bytes:
    """The raw body, at most `max_content_length` bytes: past it RequestEntityTooLarge (413), never a cut body.

    With a Content-Length, werkzeug refuses an oversized body before reading it. A chunked body has no length:
    werkzeug's own limit stops reading at the limit without saying so, so it is read here, one byte past the limit.
    """
    limit = request.max_content_length
    if request.content_length is not None or limit is None or not request.environ.get("wsgi.input_terminated"):
        return request.get_data(cache=False)
    stream = request.environ["wsgi.input"]
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


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """The body as a dict; RequestValidationError for bad UTF-8, bad JSON, a duplicate key or a non-object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestValidationError(
            [problem(["body"], f"Body is not valid UTF-8 (byte {exc.start})", "json_invalid")]
        ) from None
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


def has_duplicate_keys(raw: bytes, parsed_keys: int) -> bool:
    """True when the JSON text holds more keys than the `parsed_keys` its parsed objects kept."""
    return key_count(raw) != parsed_keys
