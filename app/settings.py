"""Settings: the `ATTRIBUTION_*` environment variables, read once and validated here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from providers.settings import Setting, SettingError

PREFIX = "ATTRIBUTION_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

KIB, MIB, GIB = 1024, 1024**2, 1024**3

PROVIDER = Setting(
    "ATTRIBUTION_PROVIDER",
    "`telemetry` (its old name `kernel_log` is still accepted), `fact`, or a `module:attribute` path to a provider "
    "factory kept outside the package",
    unset="(required)",
)
BIND = Setting("ATTRIBUTION_BIND", "where gunicorn serves the API", "127.0.0.1:8000")
METRICS_BIND = Setting(
    "ATTRIBUTION_METRICS_BIND",
    "where the gunicorn master serves Prometheus metrics; must be another port. A second instance on one machine "
    "needs both this and `ATTRIBUTION_BIND` set to free ports",
    "127.0.0.1:9464",
)
WORKERS = Setting("ATTRIBUTION_WORKERS", "gunicorn worker processes", 2, 1, 64)
THREADS = Setting("ATTRIBUTION_THREADS", "request threads per worker (gthread)", 8, 1, 256)
HEADER_TIMEOUT = Setting(
    "ATTRIBUTION_HEADER_TIMEOUT_SECONDS",
    "the request line and headers must arrive within this, from the connection (or the request's first byte on a "
    "kept-alive one); past it 408",
    10, 1, 300,
)
BODY_TIMEOUT = Setting(
    "ATTRIBUTION_BODY_TIMEOUT_SECONDS", "the whole body must arrive within this after the headers; past it 408",
    30, 1, 600,
)
BODY_MIN_RATE = Setting(
    "ATTRIBUTION_BODY_MIN_RATE",
    "bytes/s a body must average from its first second on; below it 408; 0 turns the check off",
    4096, 0, GIB, size=True,
)
WORKER_CONNECTIONS = Setting(
    "ATTRIBUTION_WORKER_CONNECTIONS",
    "open connections per worker; past it the worker stops accepting until one closes",
    1000, 2, 100000, rule="above `ATTRIBUTION_THREADS`",
)
GRACEFUL_TIMEOUT = Setting(
    "ATTRIBUTION_GRACEFUL_TIMEOUT_SECONDS", "on SIGTERM, how long in-flight requests may take to finish", 30, 1, 600
)
LOG_LEVEL = Setting("ATTRIBUTION_LOG_LEVEL", "`debug`, `info`, `warning`, `error` or `critical`", "info")
MAX_BODY_BYTES = Setting(
    "ATTRIBUTION_MAX_BODY_BYTES", "request bodies past this are refused with 413", 4 * MIB, KIB, GIB, size=True
)
SESSION_TTL = Setting(
    "ATTRIBUTION_SESSION_TTL_SECONDS", "how long a session id can be continued with `slow`", 86400, 60, 30 * 86400
)
SESSION_SECRET_SETTING = Setting(
    "ATTRIBUTION_SESSION_SECRET",
    "signs session ids (HMAC-SHA256) so replicas accept only ids one of them issued; a comma-separated list rotates "
    "secrets: the first signs, any is accepted; each at least 16 characters. From a Kubernetes Secret",
)
PROVIDER_CONCURRENCY = Setting(
    "ATTRIBUTION_PROVIDER_CONCURRENCY", "provider calls that may run at once in one worker", 32, 1, 1024
)

#: Every setting of the service itself, in the README's order (providers declare theirs as `SETTINGS` beside their
#: factory; see app/setting_names.py). A new setting is one declaration here; the README's table must then show its
#: row (`Setting.readme_row`), which a test checks. A variable with the prefix that no declaration names stops the
#: boot.
SERVICE_SETTINGS: tuple[Setting, ...] = (
    PROVIDER,
    BIND,
    METRICS_BIND,
    WORKERS,
    THREADS,
    HEADER_TIMEOUT,
    BODY_TIMEOUT,
    BODY_MIN_RATE,
    WORKER_CONNECTIONS,
    GRACEFUL_TIMEOUT,
    LOG_LEVEL,
    MAX_BODY_BYTES,
    SESSION_TTL,
    SESSION_SECRET_SETTING,
    PROVIDER_CONCURRENCY,
)


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the variable."""


def _integer(environ: Mapping[str, str], setting: Setting) -> int:
    try:
        return setting.integer(environ)
    except SettingError as exc:
        raise SettingsError(str(exc)) from None


SESSION_SECRET = f"{PREFIX}SESSION_SECRET"
MIN_SECRET_CHARS = 16


def _secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """ATTRIBUTION_SESSION_SECRET: one secret, or a comma-separated list (the first signs, any is accepted)."""
    raw = environ.get(SESSION_SECRET, "")
    if not raw.strip():
        return ()
    secrets = tuple(part.strip() for part in raw.split(","))
    if any(len(secret) < MIN_SECRET_CHARS for secret in secrets):
        # Never echo the value: it is a secret.
        raise SettingsError(
            f"{SESSION_SECRET} must be a comma-separated list of secrets of at least {MIN_SECRET_CHARS} characters each"
        )
    return secrets


@dataclass(frozen=True)
class Settings:
    """The Adapter's own settings; provider settings travel in `options` and are validated by the provider."""

    provider: str
    max_body_bytes: int = int(MAX_BODY_BYTES.default)  # type: ignore[arg-type]
    session_ttl_seconds: int = int(SESSION_TTL.default)  # type: ignore[arg-type]
    provider_concurrency: int = int(PROVIDER_CONCURRENCY.default)  # type: ignore[arg-type]
    log_level: str = str(LOG_LEVEL.default)
    options: Mapping[str, str] = field(default_factory=dict)
    session_secrets: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        provider = PROVIDER.text(env) or ""
        if not provider:
            raise SettingsError(f"{PREFIX}PROVIDER is not set: choose fact, telemetry, or a 'module:attribute' path")
        log_level = (LOG_LEVEL.text(env) or str(LOG_LEVEL.default)).lower()
        if log_level not in LOG_LEVELS:
            raise SettingsError(f"{PREFIX}LOG_LEVEL={log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        return cls(
            provider=provider,
            max_body_bytes=_integer(env, MAX_BODY_BYTES),
            session_ttl_seconds=_integer(env, SESSION_TTL),
            provider_concurrency=_integer(env, PROVIDER_CONCURRENCY),
            log_level=log_level,
            options={key: value for key, value in env.items() if key.startswith(PREFIX) and key != SESSION_SECRET},
            session_secrets=_secrets(env),
        )


def _address(environ: Mapping[str, str], setting: Setting) -> str:
    name = setting.name
    raw = setting.text(environ) or str(setting.default)
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise SettingsError(f"{name}={raw!r} is not a HOST:PORT address")
    return raw


@dataclass(frozen=True)
class ServerSettings:
    """What the gunicorn config needs; read by conf/gunicorn.conf.py before the app is loaded."""

    bind: str = str(BIND.default)
    metrics_bind: str = str(METRICS_BIND.default)
    workers: int = int(WORKERS.default)  # type: ignore[arg-type]
    threads: int = int(THREADS.default)  # type: ignore[arg-type]
    graceful_timeout: int = int(GRACEFUL_TIMEOUT.default)  # type: ignore[arg-type]
    # Bounds on one caller's connection, enforced by app/worker.py before a request reaches a thread.
    header_timeout: int = int(HEADER_TIMEOUT.default)  # type: ignore[arg-type]
    body_timeout: int = int(BODY_TIMEOUT.default)  # type: ignore[arg-type]
    body_min_rate: int = int(BODY_MIN_RATE.default)  # type: ignore[arg-type]
    worker_connections: int = int(WORKER_CONNECTIONS.default)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if environ is None else environ
        settings = cls(
            bind=_address(env, BIND),
            metrics_bind=_address(env, METRICS_BIND),
            workers=_integer(env, WORKERS),
            threads=_integer(env, THREADS),
            graceful_timeout=_integer(env, GRACEFUL_TIMEOUT),
            header_timeout=_integer(env, HEADER_TIMEOUT),
            body_timeout=_integer(env, BODY_TIMEOUT),
            body_min_rate=_integer(env, BODY_MIN_RATE),
            worker_connections=_integer(env, WORKER_CONNECTIONS),
        )
        if settings.worker_connections <= settings.threads:
            raise SettingsError(f"{PREFIX}WORKER_CONNECTIONS must be larger than {PREFIX}THREADS")
        if settings.bind.rpartition(":")[2] == settings.metrics_bind.rpartition(":")[2]:
            raise SettingsError(f"{PREFIX}METRICS_BIND must use another port than {PREFIX}BIND")
        return settings
