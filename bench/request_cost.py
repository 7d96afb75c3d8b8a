"""What each step of a request costs, in machine instructions: a count that a busy shared machine does not move.

Each variant runs in a process of its own under valgrind's callgrind, which counts the instructions the process
executes: once with no timed request and once with `-n` requests; the difference divided by `-n` is the cost of one
request. The requests are the README's, sent to the WSGI app directly with the body held whole (as the project's
gunicorn worker hands it over), with multiprocess metrics on (as under gunicorn) and the request log line off (as
`bench/all.py` runs the servers: `ATTRIBUTION_LOG_LEVEL=warning`). The Adapter runs `telemetry` on a one-line kernel
log that has settled, so the repeated request is answered from the provider's kept answer, as in the throughput goal.

Variants:
- `bare`: the bare Flask endpoint of bench/bare_app.py (parse the body, answer a fixed small JSON);
- `adapter`: the Adapter, the same request repeated; `adapter-new-window`: a new failure time in every request;
- `without <step>`: the Adapter with that step's first result kept and handed back at once, so the difference to
  `adapter` is what the step costs: `load` (bounds, orjson, the bulk check, duplicate keys), `to_request` (the
  provider port's dataclasses), `provider` (the kept answer and its proof), `guard`, `session` (the session id),
  `answer` (the answer as JSON-ready data), `metrics` (every metric write), `hooks` (the request hooks: request id,
  log context, metrics of the HTTP request); `without all` keeps every one of them at once: what is left is Flask and
  the view's glue.

This is a diagnostic, not a goal figure: the goals are measured over HTTP by bench/all.py. Instructions are not time
(a syscall counts little here, a cache miss nothing), but they add up step by step and, with the string hashes fixed
(`PYTHONHASHSEED=0` in each counted process), repeat nearly to the instruction. The steps' costs overlap a little (the
hooks' metric writes are also `metrics`'), so they add up to a bit more than `without all` saves.

    .venv/bin/python bench/request_cost.py [-n 500] [--jobs 2] [--only bare,adapter,...]

valgrind must be installed (Debian/Ubuntu: `apt-get install valgrind`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("load", "to_request", "provider", "guard", "session", "answer", "metrics", "hooks")
VARIANTS = ("bare", "adapter", "adapter-new-window", *(f"without {s}" for s in STEPS), "without all")
WARM_UP = 200
_COLLECTED = re.compile(r"Collected : (\d+)")


def _first(function: Any) -> Any:
    """`function`, answering every call after the first with the first call's result."""
    kept: list[Any] = []

    def first(*args: Any, **kwargs: Any) -> Any:
        if not kept:
            kept.append(function(*args, **kwargs))
        return kept[0]

    return first


def _without(app: Any, step: str) -> None:
    """Keep `step`'s first result (see the module's text) in the running app."""
    import contextlib

    import app.attribution as view
    import app.service as service_module
    from app.metrics import AdapterMetrics

    state = app.extensions["attribution_adapter"]
    service = state.service
    if step == "load":
        view._load = _first(view._load)
    elif step == "to_request":
        view.to_request = _first(view.to_request)
    elif step == "provider":
        object.__setattr__(service.provider, "fast", _first(service.provider.fast))
    elif step == "guard":
        service_module.check_outcome = lambda answer, scope: answer
    elif step == "session":
        service.sessions = type("KeptSession", (), {"issue": staticmethod(_first(service.sessions.issue))})()
    elif step == "answer":
        view.response_json = _first(view.response_json)
    elif step == "metrics":
        for name in ("request_started", "request_finished", "observe_http", "observe_provider_call", "observe_answer"):
            setattr(AdapterMetrics, name, lambda self, *args, **kwargs: None)
        service.call_in_flight = contextlib.nullcontext
    elif step == "hooks":
        from flask import g

        request_id = "0" * 32

        def start() -> None:  # what the view reads from the hooks' work
            g.started_monotonic = time.monotonic()
            g.request_id = request_id

        for table in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
            table.clear()
        app.before_request_funcs[None] = [start]
    else:
        raise ValueError(step)


def child(variant: str, n: int) -> None:
    """Build the variant's app, warm it up, then serve `n` requests (the parent counts the instructions)."""
    import logging

    sys.path.insert(0, str(ROOT))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-request-cost-metrics-")
    import orjson
    from werkzeug.test import EnvironBuilder

    from app.body import HeldBody
    from app.openapi import SEED_EXAMPLE
    from bench._servers import with_failure_time

    body = orjson.dumps(SEED_EXAMPLE)
    if variant == "bare":
        from bench.bare_app import app
    else:
        from bench.profile_request import build_app

        app = build_app("telemetry", keep_answers=True)
        logging.getLogger("attribution_adapter").setLevel(logging.WARNING)
        if variant.startswith("without "):
            for step in STEPS if variant == "without all" else (variant.removeprefix("without "),):
                _without(app, step)
    if variant == "adapter-new-window":
        bodies = [with_failure_time(body, i + 1) for i in range(WARM_UP + n)]
    else:
        bodies = [body] * (WARM_UP + n)
    environ = EnvironBuilder(path="/v1/attribution", method="POST", data=body, content_type="application/json")
    base = environ.get_environ()

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        if not status.startswith("200"):
            raise SystemExit(f"{variant}: {status}")

    for raw in bodies:
        env = dict(base)
        env["wsgi.input"] = HeldBody(raw)
        env["CONTENT_LENGTH"] = str(len(raw))
        b"".join(app(env, start_response))
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def instructions(variant: str, n: int) -> int:
    """Instructions `child(variant, n)` executes, counted by callgrind."""
    with tempfile.TemporaryDirectory(prefix="bench-request-cost-") as tmp:
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, __file__,
             "--child", variant, "-n", str(n)],
            cwd=ROOT, capture_output=True, text=True, check=False, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
    found = _COLLECTED.search(run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{variant}: valgrind run failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return int(found.group(1))


def per_request(variant: str, n: int) -> float:
    return (instructions(variant, n) - instructions(variant, 0)) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="requests counted in each variant")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="variants counted at once")
    parser.add_argument("--only", default="", help="comma-separated variants (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/request_cost.py: valgrind is not installed (apt-get install valgrind); nothing counted")
    chosen = [v.strip() for v in args.only.split(",") if v.strip()] or list(VARIANTS)
    unknown = sorted(set(chosen) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"instructions a request, ({args.n} requests - 0) / {args.n}, counted by callgrind, in process")
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        costs = dict(zip(chosen, pool.map(lambda v: per_request(v, args.n), chosen), strict=True))
    bare, adapter = costs.get("bare"), costs.get("adapter")
    print(f"{'variant':24s} {'instr.':>11s} {'beyond bare':>12s} {'step costs':>11s}")
    for variant, cost in costs.items():
        beyond = f"{cost - bare:12,.0f}" if bare is not None and variant != "bare" else " " * 12
        step = f"{adapter - cost:11,.0f}" if adapter is not None and variant.startswith("without ") else ""
        print(f"{variant:24s} {cost:11,.0f} {beyond} {step}")


if __name__ == "__main__":
    main()
