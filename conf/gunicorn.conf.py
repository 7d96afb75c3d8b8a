"""gunicorn configuration for the Attribution Adapter: `gunicorn -c conf/gunicorn.conf.py wsgi:app`.

Every value comes from an `ATTRIBUTION_*` variable read in app/settings.py; see the README's table.
"""

import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

# prometheus_client decides at its first import whether it runs in multiprocess mode: set the directory before any
# import below can pull it in. An operator's directory (read-only root filesystems) is emptied; our own is removed.
# A SIGHUP reload runs this file again in the same master: the directory and its counts then stay as they are.
_PID = str(os.getpid())
_RELOADED = os.environ.get("ADAPTER_METRICS_DIR_LOADED_BY") == _PID
os.environ["ADAPTER_METRICS_DIR_LOADED_BY"] = _PID
if not _RELOADED:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
        for _stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
            _stale.unlink()
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="attribution-adapter-metrics-")
        os.environ["ADAPTER_METRICS_DIR_OWNED_BY"] = _PID
_METRICS_DIR_OWNED = os.environ.get("ADAPTER_METRICS_DIR_OWNED_BY") == _PID

from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics  # noqa: E402

from app.logs import json_line as _json_line  # noqa: E402
from app.logs import logconfig_dict as _logconfig_dict  # noqa: E402
from app.ports import bind_problem as _bind_problem  # noqa: E402
from app.settings import LOG_LEVELS, ServerSettings, SettingsError  # noqa: E402

try:
    _server = ServerSettings.from_env()
except SettingsError as exc:
    print(_json_line(50, f"attribution-adapter: cannot start: {exc}"), file=sys.stderr, flush=True)
    raise SystemExit(4) from None

bind = [_server.bind]
workers = _server.workers
# Provider calls mostly wait on I/O (log reads, HTTP to backends): threads, not processes, carry the concurrency.
# gthread whose event loop reads each whole request within bounds before a thread serves it: see app/worker.py.
worker_class = "app.worker.AdapterWorker"
threads = _server.threads
worker_connections = _server.worker_connections
# For gthread workers this is a heartbeat, not a request limit; keep it above the largest timeout_ms (300 s).
timeout = 330
# On SIGTERM workers stop accepting and in-flight requests get this long to finish.
graceful_timeout = _server.graceful_timeout
keepalive = 5
# Build settings and provider once in the master: a bad setting or a missing dependency stops the boot
# before any worker is forked, instead of workers failing one after another.
preload_app = True
control_socket_disable = True
_level = os.environ.get("ATTRIBUTION_LOG_LEVEL", "info").strip().lower() or "info"
logconfig_dict = _logconfig_dict(_level if _level in LOG_LEVELS else "info")
accesslog = None


def _cannot_start(server, message):  # noqa: ANN001, ANN202
    """One error line and exit 4 (as for a bad setting); gunicorn's on_exit hook does not run on this path."""
    server.log.error("attribution-adapter: cannot start: %s", message)
    if _METRICS_DIR_OWNED:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
    sys.exit(4)


IN_USE = "address already in use"
#: said after a port in use: the commonest cause on a developer's machine is another instance with the same defaults
_SECOND_INSTANCE = (
    " (a second instance on one machine needs both ATTRIBUTION_BIND and ATTRIBUTION_METRICS_BIND set to free ports)"
)


def on_starting(server):  # noqa: ANN001, ANN201 - gunicorn hook, before gunicorn binds
    """A port in use is one line naming the setting, not gunicorn's retries and a metrics traceback."""
    for setting, address in (("ATTRIBUTION_BIND", _server.bind), ("ATTRIBUTION_METRICS_BIND", _server.metrics_bind)):
        problem = _bind_problem(address)
        if problem is not None:
            hint = _SECOND_INSTANCE if problem == IN_USE else ""
            _cannot_start(server, f"{setting}={address} cannot be bound: {problem}{hint}")


def when_ready(server):  # noqa: ANN001, ANN201 - gunicorn hook
    """The master serves the summed metrics of all workers on its own port, never on the app's."""
    host, _, port = _server.metrics_bind.rpartition(":")
    try:
        GunicornPrometheusMetrics.start_http_server_when_ready(int(port), host=host.strip("[]"))
    except OSError as exc:  # taken since on_starting looked
        _cannot_start(server, f"ATTRIBUTION_METRICS_BIND={_server.metrics_bind} cannot be bound: {exc.strerror or exc}")
    server.log.info("metrics on http://%s/metrics", _server.metrics_bind)


def pre_fork(server, worker):  # noqa: ANN001, ANN201 - gunicorn hook, in the master
    """What the master loaded (the app, its schemas, the catalogue) is kept out of the workers' garbage collections:
    a full collection then walks only what a worker made itself, and the pages stay shared with the master."""
    gc.freeze()


def post_fork(server, worker):  # noqa: ANN001, ANN201 - gunicorn hook, in the new worker before its threads start
    """The provider starts what must be forked while the worker has one thread (the telemetry provider's kernel-log
    scan process); a process it forks closes the listening sockets."""
    adapter = getattr(worker.app.wsgi(), "extensions", {}).get("attribution_adapter")
    if adapter is not None:
        adapter.service.after_fork([s.fileno() for s in worker.sockets])


def worker_exit(server, worker):  # noqa: ANN001, ANN201 - gunicorn hook, in the exiting worker
    """A worker that stops (SIGTERM, max requests) closes its provider: Provider.close is called once per process."""
    adapter = getattr(getattr(worker, "wsgi", None), "extensions", {}).get("attribution_adapter")
    if adapter is not None:
        adapter.service.close()


def child_exit(server, worker):  # noqa: ANN001, ANN201 - gunicorn hook
    GunicornPrometheusMetrics.mark_process_dead_on_child_exit(worker.pid)


def on_exit(server):  # noqa: ANN001, ANN201 - gunicorn hook
    if _METRICS_DIR_OWNED:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
