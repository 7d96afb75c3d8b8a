"""Reading the request body as one strict JSON object: every way it can fail is a 422 problem list."""

from __future__ import annotations

import json
from typing import Any

from flask import Request

from schemas.messages import message_type


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


def read_json_object(request: Request) -> dict[str, Any]:
    """The body as a dict; RequestValidationError for a wrong content type, bad UTF-8, bad JSON or a non-object.

    Reading is bounded by the app's MAX_CONTENT_LENGTH (413 past it), before any check of the content.
    """
    raw = request.get_data(cache=False)
    if request.mimetype != "application/json":
        raise RequestValidationError(
            [problem(["header", "content-type"], "Content-Type must be application/json", "content_type")]
        )
    charset = request.mimetype_params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise RequestValidationError(
            [problem(["header", "content-type"], "The JSON body must be encoded as UTF-8", "content_type")]
        )
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
            [problem(["body"], f"JSON decode error: {exc.msg} at line {exc.lineno} column {exc.colno}", "json_invalid")]
        ) from None
    except ValueError as exc:
        raise RequestValidationError([problem(["body"], f"JSON decode error: {exc}", "json_invalid")]) from None
    except RecursionError:
        raise RequestValidationError([problem(["body"], "JSON is nested too deeply", "json_invalid")]) from None
    if not isinstance(data, dict):
        raise RequestValidationError([problem(["body"], "Input should be a JSON object", "dict_type")])
    return data
