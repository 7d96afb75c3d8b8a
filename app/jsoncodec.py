"""The app's JSON encoder: orjson behind Flask's JSON provider interface, with the stdlib as the fallback.

Output keeps Flask's defaults (sorted keys, compact, a final newline; indented in debug mode) and is valid JSON with
the same values; non-ASCII characters are written as UTF-8 rather than `\\uXXXX` escapes. What orjson cannot write
(a lone surrogate in a string, an integer past 64 bits, a non-string key) is written by the stdlib encoder, as
before. Reading stays with the stdlib (`loads`): request bodies have their own strict reader in app/body.py.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Response
from flask.json.provider import DefaultJSONProvider

_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class OrjsonProvider(DefaultJSONProvider):
    """Flask's `DefaultJSONProvider` with orjson for `dumps` and `response` (see the module docstring)."""

    def encode(self, obj: Any) -> bytes:
        """`obj` as compact JSON bytes with sorted keys; values orjson cannot write go through the stdlib."""
        try:
            # Dates and dataclasses go through Flask's own `default`, as they would with the stdlib encoder.
            return orjson.dumps(obj, default=self.default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().dumps(obj, separators=(",", ":")).encode()

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if kwargs:
            return super().dumps(obj, **kwargs)
        return self.encode(obj).decode()

    def response(self, *args: Any, **kwargs: Any) -> Response:
        if (self.compact is None and self._app.debug) or self.compact is False:
            return super().response(*args, **kwargs)
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(self.encode(obj) + b"\n", mimetype=self.mimetype)
