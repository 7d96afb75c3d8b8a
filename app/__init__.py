"""The Attribution Adapter's Flask application: `create_app` builds it, `wsgi.py` serves it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType
from typing import Any

from flask import Flask, Response, g, request

from app.jsoncodec import OrjsonProvider
from app.logs import LOGGER, new_request_id, request_id_var
from app.metrics import AdapterMetrics
from app.service import AttributionService
from app.sessions import SessionCodec
from app.settings import Settings
from providers.base import Provider

__version__ = "0.1.0"


class AdapterFlask(Flask):
    """Flask, with its check for `async def` hooks and views (`ensure_sync`, made for every hook and view of every
    request) made once per plain function."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sync: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        known = self._sync.get(func)
        if known is None:
            known = super().ensure_sync(func)
            # Only module-level and closure functions: a bound method is a new object at every lookup.
            if type(func) is FunctionType and len(self._sync) < 1024:
                self._sync[func] = known
        return known


@dataclass(frozen=True)
class AdapterState:
    """What the views need from the factory, kept in `app.extensions["attribution_adapter"]`."""

    service: AttributionService
    metrics: AdapterMetrics
    provider_name: str
    version: str


def register_blueprints(app: Flask) -> None:
    from app.attribution import bp as attribution_bp
    from app.health import bp as health_bp

    app.register_blueprint(attribution_bp)
    app.register_blueprint(health_bp)


request_log = logging.getLogger(f"{LOGGER}.request")


def _elapsed(ctx: Any) -> float | None:
    """Seconds since the request's start (`g.started_monotonic`), or None when its start was never taken."""
    started = ctx.get("started_monotonic")
    return None if started is None else max(time.monotonic() - started, 0.0)


def register_request_context(app: Flask, provider_name: str, metrics: AdapterMetrics) -> None:
    """A request id and a start time for every request; the id on every response and one log line per request."""

    @app.before_request
    def _start() -> None:
        ctx = g._get_current_object()  # type: ignore[attr-defined]
        ctx.started_monotonic = time.monotonic()
        ctx.request_id = new_request_id()
        # Every line logged while this request is served carries its id (app.logs.RequestIdFilter).
        ctx.request_id_token = request_id_var.set(ctx.request_id)
        metrics.request_started()
        ctx.in_flight = True

    @app.after_request
    def _finish(response: Response) -> Response:
        ctx = g._get_current_object()  # type: ignore[attr-defined]
        request_id = ctx.get("request_id")
        if request_id is None:  # failed before before_request ran
            request_id = ctx.request_id = new_request_id()
        response.headers["X-Request-ID"] = request_id
        status = response.status_code
        req = request._get_current_object()  # type: ignore[attr-defined]
        elapsed = _elapsed(ctx)
        metrics.observe_http(req.method, req.endpoint, status, elapsed)
        ctx.http_observed = True
        level = logging.ERROR if status >= 500 else logging.WARNING if status >= 400 else logging.INFO
        if not request_log.isEnabledFor(level):  # e.g. ATTRIBUTION_LOG_LEVEL=warning and a 200: no line to build
            return response
        # The record is made directly: `Logger.log` would first walk the stack for the caller's file and line,
        # which no field of the line holds.
        record = request_log.makeRecord(
            request_log.name,
            level,
            __file__,
            0,
            "request",
            None,
            None,
            extra={
                "request_id": request_id,
                "trace_id": ctx.get("trace_id"),
                "method": req.method,
                # The route, not the raw path: a path is caller input and unbounded.
                "path": req.url_rule.rule if req.url_rule is not None else None,
                "phase": ctx.get("phase"),
                "status": status,
                "outcome": ctx.get("outcome"),
                "provider": provider_name,
                "duration_ms": None if elapsed is None else round(elapsed * 1000, 3),
            },
        )
        request_log.handle(record)
        return response

    @app.teardown_request
    def _forget(exc: BaseException | None) -> None:
        ctx = g._get_current_object()  # type: ignore[attr-defined]
        if exc is not None:
            answered = ctx.get("http_observed", False)
            metrics.observe_http_exception(request.method, request.endpoint, _elapsed(ctx), answered)
        if ctx.pop("in_flight", False):
            metrics.request_finished()
        token = ctx.pop("request_id_token", None)
        if token is not None:
            request_id_var.reset(token)


def create_app(settings: Settings | None = None, provider: Provider | None = None) -> Flask:
    """Build the app. Without arguments, settings come from the environment and the provider from the registry."""
    from app.errors import register_error_handlers
    from providers import load_provider

    if settings is None:
        settings = Settings(provider=provider.name) if provider is not None else Settings.from_env()
    if provider is None:
        provider = load_provider(settings.provider, settings.options)

    app = AdapterFlask(__name__)
    app.json = OrjsonProvider(app)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    logging.getLogger(LOGGER).setLevel(settings.log_level.upper())
    metrics = AdapterMetrics(
        app,
        version=__version__,
        provider=provider.name,
        provider_version=provider.version,
        provider_concurrency=settings.provider_concurrency,
    )
    sessions = SessionCodec(
        provider=provider.session_identity or provider.name,
        ttl_seconds=settings.session_ttl_seconds,
        secrets=settings.session_secrets,
    )
    service = AttributionService(
        provider,
        sessions,
        settings.provider_concurrency,
        on_provider_call=metrics.observe_provider_call,
        on_source_failure=metrics.observe_source_failure,
        call_in_flight=metrics.provider_call_in_flight,
    )
    app.extensions["attribution_adapter"] = AdapterState(
        service=service, metrics=metrics, provider_name=provider.name, version=__version__
    )
    register_request_context(app, provider.name, metrics)
    register_blueprints(app)
    register_error_handlers(app)
    return app
