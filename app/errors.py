"""Every error handler of the app, in one place: each error body is dumped through the schema that documents it."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException, InternalServerError

from app.body import RequestValidationError
from app.guard import public_message
from providers.base import ProviderConstructionError
from schemas.response import ErrorDetailSchema, ValidationErrorSchema

log = logging.getLogger("attribution_adapter.errors")

_validation_schema = ValidationErrorSchema()
_detail_schema = ErrorDetailSchema()

DETAILS = {
    404: "Not Found: no such path",
    405: "Method Not Allowed",
    413: "Request body is larger than the configured limit",
}


def detail_response(status: int, detail: str) -> Response:
    response = jsonify(_detail_schema.dump({"detail": detail}))
    response.status_code = status
    return response


def _validation_error(error: RequestValidationError) -> Response:
    log.info("request rejected: %d problem(s), %d listed", error.total, len(error.problems))
    response = jsonify(_validation_schema.dump({"detail": error.problems}))
    response.status_code = 422
    return response


def _http_error(error: HTTPException) -> Response:
    status = error.code or 500
    if status >= 500:
        log.error("HTTP %d: %s", status, error.name)
    response = detail_response(status, DETAILS.get(status, error.name))
    # Keep the headers werkzeug sets for the status, e.g. Allow on a 405.
    for name, value in error.get_headers():
        if name.lower() != "content-type":
            response.headers[name] = value
    return response


def _construction_error(error: ProviderConstructionError) -> Response:
    reason = public_message(str(error), "no reason given")
    log.error("provider could not be constructed for the request: %s", reason)
    # One bounded line of the provider's message: a multi-line message could carry a stack trace.
    return detail_response(500, f"The provider could not be constructed for this request: {reason}")


def _unexpected(error: Exception) -> Response:
    original = getattr(error, "original_exception", None) or error
    log.error("unexpected %s", type(original).__name__, exc_info=original)
    return detail_response(500, "Internal server error")


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(RequestValidationError, _validation_error)
    app.register_error_handler(ProviderConstructionError, _construction_error)
    app.register_error_handler(InternalServerError, _unexpected)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
