"""The command line, `attribution-adapter`: check the telemetry, replay a request in process, export OpenAPI.

It is a second entry beside `wsgi.py`: settings and provider come from `app.boot.boot`, the function the server's
boot calls, and `replay` sends the request through the app `create_app` builds, so neither can drift from the server.
Every failure is one line on stderr and a non-zero exit; no traceback reaches the user. See docs/cli.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from app import __version__, create_app
from app.boot import BOOT_ERRORS, CANNOT_START, Booted, boot
from app.logs import LOGGER, JsonFormatter, RequestIdFilter
from providers.base import CheckReport, CheckSeverity, Deadline

PROG = "attribution-adapter"
#: exit codes: 0 success; CANNOT_START (4) a setting or the provider is wrong, as at boot
EXIT_PROBLEMS = 1  # check found errors, replay got a status other than 200, or the command failed
EXIT_USAGE = 2  # the command line or its input file is wrong (click's own code for usage errors)
#: the JSON report's shape version (docs/cli.md); a change that is not an addition raises it
REPORT_VERSION = 1
DEFAULT_CHECK_TIMEOUT_S = 120.0
ATTRIBUTION_PATH = "/v1/attribution"
METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"


def _utf8(text: str) -> bytes:
    """UTF-8 whatever the terminal's encoding; a file name that is not UTF-8 shows its bytes escaped."""
    return text.encode("utf-8", "backslashreplace")


def _say(command: str | None, message: str) -> None:
    """One line on stderr: the program, the command, the message (never a traceback)."""
    prefix = f"{PROG} {command}" if command else PROG
    text = " ".join(message.split())  # one line, whatever the message held
    click.echo(_utf8(f"{prefix}: {text}\n"), err=True, nl=False)


class OneLineGroup(click.Group):
    """A click group whose failures are one line on stderr, also when run through click's test runner."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        # The command's name, for the error line; an option's value that equals a command name is a harmless miss.
        command = next((a for a in args if a in self.commands), None)
        try:
            result = super().main(args, prog_name or PROG, complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
        except click.exceptions.NoArgsIsHelpError as exc:
            exc.show()
            code = EXIT_USAGE
        except click.UsageError as exc:
            where = f"{PROG} {command}" if command else PROG
            _say(command, f"{exc.format_message()} (see {where} --help)")
            code = EXIT_USAGE
        except click.ClickException as exc:
            _say(command, exc.format_message())
            code = exc.exit_code
        except click.Abort:
            _say(command, "aborted")
            code = EXIT_PROBLEMS
        except Exception as exc:  # noqa: BLE001 - the user gets one line, never a traceback
            _say(command, f"failed unexpectedly ({type(exc).__name__}: {exc})")
            code = EXIT_PROBLEMS
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(PROG, cls=OneLineGroup, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name=PROG, message="%(prog)s %(version)s")
def cli() -> None:
    """The Attribution Adapter's command line.

    It reads the same ATTRIBUTION_* environment variables as the service (see the README's table).
    """


def samples_dir() -> Path:
    """The sample telemetry shipped with the package (`app/samples`, the checkout's `conf/samples`)."""
    return Path(str(resources.files("app") / "samples"))


def sample_settings() -> dict[str, str]:
    """The settings `make run` serves the samples with, the installed samples' paths in them."""
    root = samples_dir()
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel-logs"),
        "ATTRIBUTION_EPILOG_DIR": str(root / "epilog"),
        "ATTRIBUTION_JOB_LOG_DIR": str(root / "job-logs"),
    }


def _boot(command: str, samples: bool = False) -> Booted:
    """Settings and provider exactly as the server's boot builds them; a wrong one ends the command with exit 4.
    `samples`: the sample settings stand for the ones the environment does not set."""
    environ = {**sample_settings(), **os.environ} if samples else None
    try:
        booted = boot(environ)
    except BOOT_ERRORS as exc:
        _say(command, f"cannot start: {exc}")
        raise click.exceptions.Exit(CANNOT_START) from None
    for warning in booted.warnings:
        _say(command, f"warning: setting not read: {warning}")
    for notice in booted.notices:
        _say(command, f"notice: {notice}")
    return booted


@contextmanager
def _provider_logs(level: str) -> Iterator[None]:
    """The provider's warnings (and worse) as the service's JSON lines on stderr; the per-request line and the
    service's info lines are left out, since the command reports the status itself."""
    logger = logging.getLogger(LOGGER)
    request_logger = logging.getLogger(f"{LOGGER}.request")
    saved = (logger.handlers[:], logger.level, logger.propagate, request_logger.disabled)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    # On the handler: create_app sets the logger's own level from ATTRIBUTION_LOG_LEVEL.
    handler.setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    logger.handlers = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    request_logger.disabled = True
    try:
        yield
    finally:
        logger.handlers, logger.level, logger.propagate, request_logger.disabled = saved  # type: ignore[misc]


@contextmanager
def _private_metrics_dir() -> Iterator[None]:
    """A metrics directory set in the environment is the running server's (the image sets one): the command's own
    metrics go to a private directory, removed afterwards, so a replay never counts in the server's metrics."""
    shared = os.environ.get(METRICS_DIR)
    if not shared:
        yield
        return
    private = tempfile.mkdtemp(prefix=f"{PROG}-metrics-")
    os.environ[METRICS_DIR] = private
    try:
        yield
    finally:
        os.environ[METRICS_DIR] = shared
        shutil.rmtree(private, ignore_errors=True)


# ---------------------------------------------------------------- check


def report_document(booted: Booted, report: CheckReport) -> dict[str, Any]:
    """The `check --json` document (docs/cli.md)."""
    provider = booted.provider
    return {
        "report_version": REPORT_VERSION,
        "ok": report.ok,
        "settings": "valid",
        "provider": {"name": provider.name, "version": provider.version},
        "checked": report.checked,
        "summary": report.summary,
        "problems": [{"severity": p.severity.value, "where": p.where, "message": p.message} for p in report.problems],
        "details": report.details,
    }


def _report_text(booted: Booted, report: CheckReport, verbose: bool = False) -> str:
    lines = [
        f"settings: valid (ATTRIBUTION_PROVIDER={booted.settings.provider}, provider version {booted.provider.version})"
    ]
    lines += list(report.verbose_text or report.text) if verbose else list(report.text)
    if not verbose and len(report.verbose_text) > len(report.text):
        lines.append(f"({len(report.verbose_text) - len(report.text)} lines on each host and file: check --verbose)")
    if not report.checked:
        lines.append(report.summary)
    if report.problems:
        lines.append("problems:")
        lines += [f"  {p.severity.value:<8} {p.where}: {p.message}" for p in report.problems]
    lines.append(f"check {'passed' if report.ok else 'failed'}: {report.summary if report.checked else 'no errors'}")
    return "\n".join(lines) + "\n"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (shape: docs/cli.md).")
@click.option(
    "--timeout",
    type=click.FloatRange(1, 3600),
    default=DEFAULT_CHECK_TIMEOUT_S,
    show_default=True,
    help="Seconds the check may take; past them it stops and says what it did not read.",
)
@click.option(
    "--samples",
    is_flag=True,
    help="Check the sample telemetry installed with the package (ATTRIBUTION_* variables that are set still win).",
)
@click.option("--verbose", "-v", is_flag=True, help="Add a line for every host and file to the summary.")
def check(as_json: bool, timeout: float, samples: bool, verbose: bool) -> int:
    """Validate the settings as boot does, then read the configured telemetry and say what the provider would see.

    By default a summary: hosts and files counted by status, the time their lines span, every problem listed; with
    --verbose also a line for every host and file: the line formats, the time range, unreadable lines, skipped files,
    and the epilog results.
    Exits 1 naming what to fix when anything would make answers empty or wrong, 4 when a setting is wrong.
    """
    booted = _boot("check", samples)
    try:
        report = booted.provider.check(Deadline.after_ms(int(timeout * 1000)))
    finally:
        booted.provider.close()
    if as_json:
        text = json.dumps(report_document(booted, report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    else:
        text = _report_text(booted, report, verbose)
    click.echo(_utf8(text), nl=False)
    if report.ok:
        return 0
    errors = [p for p in report.problems if p.severity is CheckSeverity.ERROR]
    first = errors[0]
    more = f" (and {len(errors) - 1} more errors above)" if len(errors) > 1 else ""
    _say("check", f"failed: {first.where}: {first.message}{more}")
    return EXIT_PROBLEMS


# ---------------------------------------------------------------- replay

#: the flags that build a request body instead of REQUEST.json
REQUEST_FLAGS = (
    "nodes",
    "detected_at",
    "phase",
    "workload_id",
    "workflow_id",
    "attempt_index",
    "ranks",
    "timeout_ms",
    "detection_signal",
    "continue_session",
    "start_time",
    "end_time",
)


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def request_from_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The request body the flags describe; values go in as given, and the service validates them as any body."""
    try:
        ranks = [int(r, 10) for r in _items(values["ranks"] or "")]
    except ValueError:
        raise click.UsageError("--ranks must be integers separated by commas") from None
    scope: dict[str, Any] = {"nodes": _items(values["nodes"]), "ranks": ranks}
    if values["start_time"] is not None:
        scope["start_time"] = values["start_time"]
    if values["end_time"] is not None:
        scope["end_time"] = values["end_time"]
    body: dict[str, Any] = {
        "schema_version": "0.1.0",
        "workload_id": values["workload_id"],
        "scope": scope,
        "failure_context": {"detected_at": values["detected_at"], "detection_signal": values["detection_signal"]},
        "timeout_ms": values["timeout_ms"],
        "workload_context": {"workflow_id": values["workflow_id"], "attempt_index": values["attempt_index"]},
        "phase": values["phase"],
    }
    if values["continue_session"] is not None:
        body["continue_session"] = values["continue_session"]
    return body


def _read_request(path: str, limit: int) -> bytes:
    """At most one byte past the body limit: a larger request gets the service's own 413."""
    try:
        if path == "-":
            return sys.stdin.buffer.read(limit + 1)
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except OSError as exc:
        raise click.UsageError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None


@cli.command()
@click.argument("request_file", metavar="[REQUEST.json]", required=False)
@click.option("--nodes", help="scope.nodes, separated by commas (may be empty: --nodes '').")
@click.option("--at", "detected_at", metavar="TIME", help="failure_context.detected_at, RFC 3339 with an offset.")
@click.option("--phase", type=click.Choice(["fast", "slow"]), default="fast", show_default=True)
@click.option("--workload-id", default="replay", show_default=True)
@click.option("--workflow-id", default="replay", show_default=True, help="workload_context.workflow_id.")
@click.option("--attempt-index", type=int, default=0, show_default=True, help="workload_context.attempt_index.")
@click.option("--ranks", default="", help="scope.ranks, integers separated by commas.  [default: none]")
@click.option("--timeout-ms", type=int, default=10000, show_default=True)
@click.option("--detection-signal", default="application_error", show_default=True)
@click.option("--continue-session", metavar="ID", help="For --phase slow: the attribution_session_id of a fast answer.")
@click.option("--start", "start_time", metavar="TIME", help="scope.start_time (for slow, the epilog window's start).")
@click.option("--end", "end_time", metavar="TIME", help="scope.end_time (for slow, the epilog window's end).")
@click.option(
    "--samples",
    is_flag=True,
    help="Replay on the sample telemetry installed with the package; without REQUEST.json or flags, its request.json.",
)
@click.pass_context
def replay(ctx: click.Context, request_file: str | None, samples: bool, **values: Any) -> int:
    """Run the configured provider in process on a request and print the body the service would answer.

    The request comes from REQUEST.json ('-' reads stdin) or from the flags. It goes through the same app and
    request path as a real request, with no server and no socket; the provider reads its own source as it would.
    Prints the body on stdout; exits 0 on a 200 (whatever its error.type), 1 on any other status.
    """
    given = [name for name in REQUEST_FLAGS if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT]
    if request_file is not None and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise click.UsageError(f"give REQUEST.json or the request flags, not both ({flags} given)")
    if samples and request_file is None and not given:
        request_file = str(samples_dir() / "request.json")
    if request_file is None and (values["nodes"] is None or values["detected_at"] is None):
        raise click.UsageError("give REQUEST.json, or --nodes and --at")
    booted = _boot("replay", samples)
    limit = booted.settings.max_body_bytes
    if request_file is not None:
        body = _read_request(request_file, limit)
    else:
        body = json.dumps(request_from_flags(values)).encode()
    with _private_metrics_dir(), _provider_logs(booted.settings.log_level):
        app = create_app(booted.settings, booted.provider)
        try:
            response = app.test_client().post(ATTRIBUTION_PATH, data=body, headers={"Content-Type": "application/json"})
        finally:
            app.extensions["attribution_adapter"].service.close()
    click.echo(response.get_data(), nl=False)
    if response.status_code == 200:
        return 0
    _say("replay", f"the service answered HTTP {response.status_code} (the body is on stdout)")
    return EXIT_PROBLEMS


# ---------------------------------------------------------------- openapi


@cli.command()
def openapi() -> int:
    """Print the OpenAPI document: the same bytes as docs/openapi.json. Needs no settings."""
    from app.openapi import render

    click.echo(render().encode("utf-8"), nl=False)
    return 0


def main() -> None:
    """The console script `attribution-adapter`."""
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
