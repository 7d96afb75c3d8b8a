"""A WSGI app that answers every request with what it received, for the framing tests: served by the Adapter's own
worker class (`gunicorn -c conf/gunicorn.conf.py tests.framing.echo_app:app`), it shows where the worker read each
request to begin and end."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = environ["wsgi.input"].read()
    answer = json.dumps(
        {
            "method": environ["REQUEST_METHOD"],
            "target": environ["RAW_URI"],
            "body": body.decode("latin-1"),
        }
    ).encode()
    start_response("200 OK", [("Content-Type", "application/x-echo"), ("Content-Length", str(len(answer)))])
    return [answer]
