"""JSON log lines on stderr, one per request, for the app and for gunicorn alike.

Request and response bodies, evidence text and user ids never reach these lines: only the bounded fields below.
"""

from __future__ import annotations

import json
import logging
import os
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any

import orjson

REQUEST_FIELDS = ("request_id", "trace_id", "method", "path", "phase", "status", "outcome", "provider", "duration_ms")
LOGGER = "attribution_adapter"

#: the id of the request being served in this context; the provider's pool thread runs in a copy of the context
request_id_var: ContextVar[str | None] = ContextVar("attribution_request_id", default=None)


def new_request_id() -> str:
    """A random version-4 UUID as 32 hex digits: what `uuid.uuid4().hex` gives, without building a UUID object."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    return raw.hex()


class RequestIdFilter(logging.Filter):
    """Puts the served request's id on every record written while it is served (providers' warnings included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            request_id = request_id_var.get()
            if request_id is not None:
                record.request_id = request_id
        return True


class JsonFormatter(logging.Formatter):
    """`{"time", "level", "logger", "message", ...request fields}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in REQUEST_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(entry).decode()
        except TypeError:  # a value orjson cannot write (a lone surrogate, an integer past 64 bits)
            return json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)


def logconfig_dict(level: str) -> dict[str, Any]:
    """The `logging.config.dictConfig` used by gunicorn for its own loggers and the app's."""
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "json",
        "filters": ["request_id"],
        "stream": "ext://sys.stderr",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "app.logs.JsonFormatter"}},
        "filters": {"request_id": {"()": "app.logs.RequestIdFilter"}},
        "handlers": {"stderr": handler},
        "root": {"level": "WARNING", "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level.upper(), "handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "CRITICAL", "handlers": ["stderr"], "propagate": False},
            LOGGER: {"level": level.upper(), "handlers": ["stderr"], "propagate": False},
        },
    }


def json_line(level: int, message: str, logger: str = LOGGER) -> str:
    """One log line in the service's format, for code that runs before logging is configured (the gunicorn config)."""
    record = logging.LogRecord(logger, level, __file__, 0, message, None, None)
    return JsonFormatter().format(record)
