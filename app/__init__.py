"""The Attribution Adapter's Flask application: `create_app` builds it, `wsgi.py` serves it."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from flask import Flask, Response, g

from app.service import AttributionService
from app.sessions import SessionCodec
from app.settings import Settings
from providers.base import Provider

__version__ = "0.1.0"


@dataclass(frozen=True)
class AdapterState:
    """What the views need from the factory, kept in `app.extensions["attribution_adapter"]`."""

    service: AttributionService
    provider_name: str
    version: str


def register_blueprints(app: Flask) -> None:
    from app.attribution import bp as attribution_bp
    from app.health import bp as health_bp

    app.register_blueprint(attribution_bp)
    app.register_blueprint(health_bp)


def register_request_context(app: Flask) -> None:
    @app.before_request
    def _start() -> None:
        g.started_monotonic = time.monotonic()
        g.request_id = uuid.uuid4().hex

    @app.after_request
    def _request_id(response: Response) -> Response:
        request_id = getattr(g, "request_id", None) or uuid.uuid4().hex
        response.headers["X-Request-ID"] = request_id
        return response


def create_app(settings: Settings | None = None, provider: Provider | None = None) -> Flask:
    """Build the app. Without arguments, settings come from the environment and the provider from the registry."""
    from app.errors import register_error_handlers
    from providers import load_provider

    if settings is None:
        settings = Settings(provider=provider.name) if provider is not None else Settings.from_env()
    if provider is None:
        provider = load_provider(settings.provider, settings.options)

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    sessions = SessionCodec(provider=provider.name, ttl_seconds=settings.session_ttl_seconds)
    app.extensions["attribution_adapter"] = AdapterState(
        service=AttributionService(provider, sessions, settings.provider_concurrency),
        provider_name=provider.name,
        version=__version__,
    )
    register_request_context(app)
    register_blueprints(app)
    register_error_handlers(app)
    return app
