"""Profile: where one request's time goes, in process (Flask test client), under cProfile.

The Adapter runs `telemetry` on a one-line kernel log (a temporary directory; every request scans it, or with
`--keep-answers` the provider keeps its answers and the log is let settle, so the repeated request is answered from
the kept answer) or, with `--provider fake`, the instant fake provider. N one-node requests go through
`app.test_client()`; the top entries of the profile, sorted by cumulative time, are printed with their share of
`wsgi_app`. Before that, the same requests are timed without the profiler, calling the WSGI app directly with
prepared environs (no test client; the body held whole, as the project's worker hands it over), beside the bare
Flask app of bench/bare_app.py timed the same way.

    .venv/bin/python bench/profile_request.py [-n 3000] [--provider telemetry|fake] [--keep-answers] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import create_app  # noqa: E402
from app.body import HeldBody  # noqa: E402
from app.settings import Settings  # noqa: E402
from bench._servers import ONE_LINE, request_body  # noqa: E402


def one_line_log_dir() -> Path:
    """A kernel-log tree with one node and one line, as `ATTRIBUTION_KERNEL_LOG_DIR`."""
    root = Path(tempfile.mkdtemp(prefix="bench-kernel-log-"))
    (root / "worker-01").mkdir()
    (root / "worker-01" / "kern.log").write_text(ONE_LINE)
    return root


def quiet_json_logging() -> None:
    """The request log line at `info`, formatted as in production, written to /dev/null."""
    import logging
    import os

    from app.logs import LOGGER, JsonFormatter

    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - for the process's life
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.propagate = False


def build_app(provider: str, keep_answers: bool = False):  # noqa: ANN001, ANN201 - a Flask app
    """The app with the instant fake or `telemetry` on a one-line log; `keep_answers`: the provider keeps its
    answers (as the service's does) and the log is left to settle first, so that repeated requests are answered
    from the kept answer; else every request scans the log."""
    quiet_json_logging()
    if provider == "fake":
        from tests.fakes import FakeProvider

        return create_app(Settings(provider="fake", log_level="info"), provider=FakeProvider())
    from providers.telemetry import TelemetryProvider
    from providers.telemetry.provider import parse_settings

    options = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(one_line_log_dir()),
    }
    if keep_answers:
        time.sleep(2.5)  # past CACHE_SETTLE_NS: a file changed less than 2 s ago is not vouched for by its times
    telemetry = TelemetryProvider(parse_settings(options), keep_answers=keep_answers)
    return create_app(Settings(provider="telemetry", log_level="info", options=options), provider=telemetry)


def direct_us(app, body: bytes, n: int) -> float:  # noqa: ANN001 - a WSGI app
    """Microseconds a request, calling the WSGI app directly with environs prepared beforehand."""
    from werkzeug.test import EnvironBuilder

    def environ() -> dict:
        builder = EnvironBuilder(path="/v1/attribution", method="POST", data=body, content_type="application/json")
        env = builder.get_environ()
        env["wsgi.input"] = HeldBody(body)  # the body as the project's gunicorn worker hands it over, read whole
        return env

    def start_response(*_: object) -> None:
        return None

    for _ in range(min(n, 50)):  # warm-up
        b"".join(app(environ(), start_response))
    environs = [environ() for _ in range(n)]
    t0 = time.perf_counter()
    for env in environs:
        b"".join(app(env, start_response))
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3000, help="one-node requests under the profiler")
    parser.add_argument("--provider", choices=("telemetry", "fake"), default="telemetry")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--maximal", action="store_true", help="the maximal request (16,384 nodes, 262,144 ranks)")
    parser.add_argument(
        "--keep-answers", action="store_true", help="telemetry keeps answers: the repeated request is not scanned"
    )
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    application = build_app(args.provider, args.keep_answers)
    client = application.test_client()
    if args.maximal:
        from bench.all import maximal_body

        body = maximal_body()
    else:
        body = json.dumps(request_body(["worker-01"], [0])).encode()
    first = client.post("/v1/attribution", data=body, content_type="application/json")
    assert first.status_code == 200, first.get_data(as_text=True)[:300]
    print("answer:", first.get_data(as_text=True)[:200])
    if not args.maximal:
        from bench.bare_app import app as bare

        timed, reference = direct_us(application, body, args.n), direct_us(bare, body, args.n)
        print(f"without the profiler: {timed:.0f} us a request; the bare Flask app: {reference:.0f} us")
    for _ in range(2 if args.maximal else 50):  # warm-up
        client.post("/v1/attribution", data=body, content_type="application/json")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.n):
        client.post("/v1/attribution", data=body, content_type="application/json")
    profiler.disable()
    stats = pstats.Stats(profiler)
    whole = next(
        (v[3] for k, v in stats.stats.items() if k[2] == "wsgi_app" and k[0].endswith("flask/app.py")),
        None,  # type: ignore[attr-defined]
    )
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(args.top)
    if whole:
        print(f"wsgi_app: {whole:.3f} s cumulative over {args.n} requests = {whole / args.n * 1e6:.0f} us a request")
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)  # type: ignore[attr-defined]
        print(f"{'share':>6s} {'cum s':>7s}  function")
        for (filename, line, name), (_, _, _, cum, _) in rows[: args.top]:
            where = filename.split("site-packages/")[-1].replace(str(Path(__file__).resolve().parents[1]) + "/", "")
            print(f"{cum / whole:6.1%} {cum:7.3f}  {where}:{line}({name})")
    else:
        print(out.getvalue())


if __name__ == "__main__":
    main()
