"""Settings: the `ATTRIBUTION_*` environment variables, read once and validated here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

PREFIX = "ATTRIBUTION_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

#: Every setting of the service itself (providers declare theirs as `SETTINGS` beside their factory; see
#: app/setting_names.py). A new setting is one line here plus its row in the README's table; a variable with the
#: prefix that no declaration names stops the boot.
SERVICE_SETTINGS: tuple[str, ...] = (
    "ATTRIBUTION_PROVIDER",
    "ATTRIBUTION_BIND",
    "ATTRIBUTION_METRICS_BIND",
    "ATTRIBUTION_WORKERS",
    "ATTRIBUTION_THREADS",
    "ATTRIBUTION_GRACEFUL_TIMEOUT_SECONDS",
    "ATTRIBUTION_LOG_LEVEL",
    "ATTRIBUTION_MAX_BODY_BYTES",
    "ATTRIBUTION_SESSION_TTL_SECONDS",
    "ATTRIBUTION_PROVIDER_CONCURRENCY",
    "ATTRIBUTION_SESSION_SECRET",
    "ATTRIBUTION_HEADER_TIMEOUT_SECONDS",
    "ATTRIBUTION_BODY_TIMEOUT_SECONDS",
    "ATTRIBUTION_BODY_MIN_RATE",
    "ATTRIBUTION_WORKER_CONNECTIONS",
)


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the variable."""


def _integer(environ: Mapping[str, str], name: str, default: int, minimum: int, maximum: int) -> int:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise SettingsError(f"{name}={value} is outside {minimum}..{maximum}")
    return value


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
    max_body_bytes: int = 4 * 1024 * 1024
    session_ttl_seconds: int = 86400
    provider_concurrency: int = 32
    log_level: str = "info"
    options: Mapping[str, str] = field(default_factory=dict)
    session_secrets: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        provider = env.get(f"{PREFIX}PROVIDER", "").strip()
        if not provider:
            raise SettingsError(f"{PREFIX}PROVIDER is not set: choose fact, kernel_log, or a 'module:attribute' path")
        log_level = env.get(f"{PREFIX}LOG_LEVEL", "info").strip().lower() or "info"
        if log_level not in LOG_LEVELS:
            raise SettingsError(f"{PREFIX}LOG_LEVEL={log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        return cls(
            provider=provider,
            max_body_bytes=_integer(env, f"{PREFIX}MAX_BODY_BYTES", 4 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
            session_ttl_seconds=_integer(env, f"{PREFIX}SESSION_TTL_SECONDS", 86400, 60, 30 * 86400),
            provider_concurrency=_integer(env, f"{PREFIX}PROVIDER_CONCURRENCY", 32, 1, 1024),
            log_level=log_level,
            options={key: value for key, value in env.items() if key.startswith(PREFIX) and key != SESSION_SECRET},
            session_secrets=_secrets(env),
        )


def _address(environ: Mapping[str, str], name: str, default: str) -> str:
    raw = (environ.get(name) or default).strip()
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"{name}={raw!r} is not a HOST:PORT address")
    return raw


@dataclass(frozen=True)
class ServerSettings:
    """What the gunicorn config needs; read by conf/gunicorn.conf.py before the app is loaded."""

    bind: str = "127.0.0.1:8000"
    metrics_bind: str = "127.0.0.1:9464"
    workers: int = 2
    threads: int = 8
    graceful_timeout: int = 30
    # Bounds on one caller's connection, enforced by app/worker.py before a request reaches a thread.
    header_timeout: int = 10
    body_timeout: int = 30
    body_min_rate: int = 4096
    worker_connections: int = 1000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if environ is None else environ
        settings = cls(
            bind=_address(env, f"{PREFIX}BIND", cls.bind),
            metrics_bind=_address(env, f"{PREFIX}METRICS_BIND", cls.metrics_bind),
            workers=_integer(env, f"{PREFIX}WORKERS", cls.workers, 1, 64),
            threads=_integer(env, f"{PREFIX}THREADS", cls.threads, 1, 256),
            graceful_timeout=_integer(env, f"{PREFIX}GRACEFUL_TIMEOUT_SECONDS", cls.graceful_timeout, 1, 600),
            header_timeout=_integer(env, f"{PREFIX}HEADER_TIMEOUT_SECONDS", cls.header_timeout, 1, 300),
            body_timeout=_integer(env, f"{PREFIX}BODY_TIMEOUT_SECONDS", cls.body_timeout, 1, 600),
            body_min_rate=_integer(env, f"{PREFIX}BODY_MIN_RATE", cls.body_min_rate, 0, 1024 * 1024 * 1024),
            worker_connections=_integer(env, f"{PREFIX}WORKER_CONNECTIONS", cls.worker_connections, 2, 100000),
        )
        if settings.worker_connections <= settings.threads:
            raise SettingsError(f"{PREFIX}WORKER_CONNECTIONS must be larger than {PREFIX}THREADS")
        if settings.bind.rpartition(":")[2] == settings.metrics_bind.rpartition(":")[2]:
            raise SettingsError(f"{PREFIX}METRICS_BIND must use another port than {PREFIX}BIND")
        return settings
