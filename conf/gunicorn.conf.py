"""gunicorn configuration for the Attribution Adapter: `gunicorn -c conf/gunicorn.conf.py wsgi:app`.

Every value comes from an `ATTRIBUTION_*` variable read in app/settings.py; see the README's table.
"""

import sys

from app.settings import ServerSettings, SettingsError

try:
    _server = ServerSettings.from_env()
except SettingsError as exc:
    print(f"attribution-adapter: cannot start: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(4) from None

bind = [_server.bind]
workers = _server.workers
# Provider calls mostly wait on I/O (log reads, HTTP to backends): threads, not processes, carry the concurrency.
worker_class = "gthread"
threads = _server.threads
# For gthread workers this is a heartbeat, not a request limit; keep it above the largest timeout_ms (300 s).
timeout = 330
graceful_timeout = _server.graceful_timeout
keepalive = 5
# Build settings and provider once in the master: a bad setting or a missing dependency stops the boot
# before any worker is forked, instead of workers failing one after another.
preload_app = True
control_socket_disable = True
errorlog = "-"
accesslog = None
