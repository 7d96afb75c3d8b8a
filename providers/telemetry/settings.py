"""The open provider's settings: every variable it reads declared once as data, and the one reader of them.

`SETTINGS` is what the boot's typo check, `attribution-adapter check` and the README's table read; `parse_settings`
turns the `ATTRIBUTION_*` options into the provider's `Settings` with its sources built, or raises
ProviderConstructionError naming what is wrong.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, timedelta, tzinfo
from pathlib import Path
from typing import Any

from providers.base import MAX_EVIDENCE, ProviderConstructionError
from providers.settings import Setting, SettingError
from providers.telemetry.flight_recorder.source import MAX_FILE_BYTES as MAX_DUMP_BYTES
from providers.telemetry.joblog import MAX_NODE_BYTES, MAX_REQUEST_BYTES, ReadLimits
from providers.telemetry.joblog.loki import LokiJobLogSource, template_problem
from providers.telemetry.joblog.source import FileJobLogSource, JobLogSource
from providers.telemetry.kernel.sources import LogSource
from providers.telemetry.kernel.sources.files import DEFAULT_COMBINED, FileSource
from providers.telemetry.kernel.sources.journal import JournalSource
from providers.telemetry.kernel.sources.loki import DEFAULT_CONCURRENCY, DEFAULT_SELECTOR, LokiSource
from providers.telemetry.loki.logql import TemplateError

SOURCE = Setting(
    "ATTRIBUTION_KERNEL_LOG_SOURCE", "`files`, `loki` or `journal`", unset="(required for `telemetry`)"
)
KERNEL_LOG_DIR = Setting(
    "ATTRIBUTION_KERNEL_LOG_DIR",
    "directory of syslog files as a central rsyslog server writes them",
    unset="(required for `files`)",
)
COMBINED_FILES = Setting(
    "ATTRIBUTION_KERNEL_LOG_COMBINED_FILES", "file names that hold many hosts", ",".join(DEFAULT_COMBINED)
)
JOURNAL_DIR = Setting(
    "ATTRIBUTION_JOURNAL_DIR",
    "directory of systemd journal files (`*.journal`, archived `*@*.journal`, `*.journal~`), at its top and one "
    "folder down, as journald or `systemd-journal-remote --split-mode=host` writes them",
    unset="(required for `journal`)",
)
LOOKBACK = Setting(
    "ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS", "the `fast` window starts this long before `detected_at`", 900, 1, 86400
)
GRACE = Setting(
    "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS", "the `fast` window ends this long after `detected_at`", 120, 0, 3600
)
MAX_EVIDENCE_SETTING = Setting(
    "ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE", "log lines kept as evidence per finding", 8, 1, MAX_EVIDENCE
)
TIME_ZONE = Setting(
    "ATTRIBUTION_KERNEL_LOG_TIME_ZONE",
    "IANA zone in which log lines without a zone (RFC 3164, `journalctl -o short-precise`, `dmesg -T`) are read",
    "UTC",
)
LOKI_URL = Setting("ATTRIBUTION_LOKI_URL", "Loki's base URL", unset="(required for `loki`)")
LOKI_SELECTOR = Setting(
    "ATTRIBUTION_LOKI_SELECTOR",
    "LogQL selector template; `{hosts}` must be the whole quoted value of an `=` or `=~` matcher in the stream "
    "selector (else the boot stops) and becomes an escaped alternation of the scope's hosts",
    DEFAULT_SELECTOR,
)
LOKI_HOST_LABEL = Setting("ATTRIBUTION_LOKI_HOST_LABEL", "the stream label holding the hostname", "host")
SCAN_PROCESS = Setting(
    "ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS",
    "`1`: each worker forks a process that scans kernel logs beside it: the kernel-log files (or journal files) "
    "while the worker reads the job-log files of the same request (then a share of those files), or, kernel-log "
    "files read alone, half of a scope of 32 nodes or more; `0`: the worker scans them all itself",
    1, 0, 1,
)
LOKI_LIMIT = Setting(
    "ATTRIBUTION_LOKI_LIMIT",
    "entries per Loki page (Loki's own default bound of a query's entries); lowered to the bound Loki names when it "
    "refuses more (a tenant's `max_entries_limit_per_query` below it), from then on",
    5000, 1, 5000,
)
LOKI_MAX_PAGES = Setting(
    "ATTRIBUTION_LOKI_MAX_PAGES",
    "pages per query at most (each kernel-log query; each batch's job-log query, which is also bounded by the job-log "
    "bytes of its nodes)",
    10, 1, 100,
)
LOKI_TENANT = Setting("ATTRIBUTION_LOKI_TENANT", "sent as `X-Scope-OrgID`")
LOKI_CONCURRENCY = Setting(
    "ATTRIBUTION_LOKI_CONCURRENCY",
    "Loki queries one request runs at once, the kernel logs' and the job logs' together when both are read from Loki "
    "(a large scope is split into queries of at most 8 KiB URL each); a query answered 429 or 503 is sent again "
    "after its `Retry-After`, at most 3 times, never past the deadline",
    DEFAULT_CONCURRENCY, 1, 64,
)
JOB_LOG_DIR = Setting(
    "ATTRIBUTION_JOB_LOG_DIR",
    "directory of the jobs' own logs, `<dir>/<workload_id>/<attempt_index>/<node>.log` (rotated `.N`, `.N.gz` too); "
    "without it and without `ATTRIBUTION_LOKI_JOB_SELECTOR`, `fast` reads kernel logs only",
)
LOKI_JOB_SELECTOR = Setting(
    "ATTRIBUTION_LOKI_JOB_SELECTOR",
    'LogQL selector template of a job\'s log streams in Loki, e.g. `{job="{workload_id}"}` (`{attempt_index}` too); '
    "each placeholder stands as a whole quoted label value and is escaped; the node is the "
    "`ATTRIBUTION_LOKI_HOST_LABEL` label; only lines holding a job-log marker are asked for (docs/job-logs.md); "
    "needs `ATTRIBUTION_LOKI_URL`; not with `ATTRIBUTION_JOB_LOG_DIR`",
)
JOB_LOG_MAX_NODE_BYTES = Setting(
    "ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES", "tail of one node's job log read per request",
    MAX_NODE_BYTES, 1, MAX_NODE_BYTES, size=True,
)
JOB_LOG_MAX_REQUEST_BYTES = Setting(
    "ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES", "job-log bytes read per request in all, shared by the nodes",
    MAX_REQUEST_BYTES, 1, MAX_REQUEST_BYTES, size=True,
)
EPILOG_DIR = Setting(
    "ATTRIBUTION_EPILOG_DIR",
    "directory of epilog DCGM results for `slow`; without it `slow` answers `insufficient_telemetry`",
)
FLIGHT_RECORDER_DIR = Setting(
    "ATTRIBUTION_FLIGHT_RECORDER_DIR",
    "directory of PyTorch's NCCL flight-recorder dumps, `<dir>/<workload_id>/<attempt_index>/<node>/<dumps>` "
    "(docs/flight-recorder.md); read by `fast` beside the logs, never unpickled",
)
FLIGHT_RECORDER_MAX_FILE_BYTES = Setting(
    "ATTRIBUTION_FLIGHT_RECORDER_MAX_FILE_BYTES",
    "bytes of one flight-recorder dump at most (a larger one is a note naming it; a large pickle is read from its "
    "ends, docs/flight-recorder.md)",
    MAX_DUMP_BYTES, 1, MAX_DUMP_BYTES, size=True,
)

#: every setting this provider reads, in the README's order (the registry checks `ATTRIBUTION_*` names against it
#: at boot; a test checks the README's table against it, row by row)
SETTINGS: tuple[Setting, ...] = (
    SOURCE,
    KERNEL_LOG_DIR,
    COMBINED_FILES,
    JOURNAL_DIR,
    LOOKBACK,
    GRACE,
    MAX_EVIDENCE_SETTING,
    TIME_ZONE,
    SCAN_PROCESS,
    LOKI_URL,
    LOKI_SELECTOR,
    LOKI_HOST_LABEL,
    LOKI_LIMIT,
    LOKI_MAX_PAGES,
    LOKI_TENANT,
    LOKI_CONCURRENCY,
    JOB_LOG_DIR,
    LOKI_JOB_SELECTOR,
    JOB_LOG_MAX_NODE_BYTES,
    JOB_LOG_MAX_REQUEST_BYTES,
    EPILOG_DIR,
    FLIGHT_RECORDER_DIR,
    FLIGHT_RECORDER_MAX_FILE_BYTES,
)
_PREFIXES = (
    "ATTRIBUTION_KERNEL_LOG_", "ATTRIBUTION_LOKI_", "ATTRIBUTION_JOB_LOG_", "ATTRIBUTION_JOURNAL_",
    "ATTRIBUTION_FLIGHT_RECORDER_",
)
_KNOWN = frozenset(s.name for s in SETTINGS)
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _int(options: Mapping[str, str], setting: Setting) -> int:
    try:
        return setting.integer(options)
    except SettingError as exc:
        raise ProviderConstructionError(str(exc)) from None


def _directory(options: Mapping[str, str], setting: Setting) -> Path:
    raw = setting.text(options)
    name = setting.name
    if raw is None:
        raise ProviderConstructionError(f"{name} is not set")
    path = Path(raw)
    if not path.is_dir():
        raise ProviderConstructionError(f"{name}={raw!r} is not an existing directory")
    try:
        next(iter(path.iterdir()), None)
    except OSError as exc:
        raise ProviderConstructionError(f"{name}={raw!r} cannot be read: {exc.strerror}") from exc
    return path


def _zone(options: Mapping[str, str], setting: Setting) -> tzinfo:
    raw = setting.text(options)
    if raw is None:
        return UTC
    try:
        return zoneinfo.ZoneInfo(raw)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ProviderConstructionError(
            f"{setting.name}={raw!r} is not an IANA time zone name (e.g. UTC, Europe/Berlin)"
        ) from exc


def _paging(options: Mapping[str, str]) -> dict[str, Any]:
    """What the kernel and job-log Loki sources both read: the host label, the page size and count, the tenant."""
    label = LOKI_HOST_LABEL.text(options) or str(LOKI_HOST_LABEL.default)
    if not _LABEL.match(label):
        raise ProviderConstructionError(f"{LOKI_HOST_LABEL.name}={label!r} is not a Loki label name")
    return {
        "host_label": label,
        "limit": _int(options, LOKI_LIMIT),
        "max_pages": _int(options, LOKI_MAX_PAGES),
        "tenant": LOKI_TENANT.text(options),
    }


@dataclass(frozen=True)
class Settings:
    source: LogSource
    lookback: timedelta
    grace: timedelta
    max_evidence: int
    epilog_dir: Path | None
    #: the zone of log formats that carry none (RFC 3164, journalctl short-precise, dmesg -T)
    time_zone: tzinfo = UTC
    #: the job's own logs, read beside the kernel logs (None: not configured; answers come from kernel logs only)
    job_logs: JobLogSource | None = None
    #: the folder of NCCL flight-recorder dumps (None: not configured), and the bytes of one dump at most
    flight_recorder_dir: Path | None = None
    flight_recorder_max_file_bytes: int = MAX_DUMP_BYTES
    #: whether a worker scans the kernel logs in a process of its own while it reads job-log files (scan_process.py)
    scan_process: bool = True


def parse_settings(options: Mapping[str, str]) -> Settings:
    """Validate the `ATTRIBUTION_*` options of this provider; ProviderConstructionError names what is wrong."""
    for name in options:
        if name.startswith(_PREFIXES) and name not in _KNOWN:
            raise ProviderConstructionError(f"{name} is not a telemetry setting (a typo?)")
    kind = SOURCE.text(options)
    if kind is None:
        raise ProviderConstructionError(
            "ATTRIBUTION_KERNEL_LOG_SOURCE is not set: choose 'files', 'loki' or 'journal'"
        )
    source: LogSource
    if kind == "files":
        root = _directory(options, KERNEL_LOG_DIR)
        combined_raw = COMBINED_FILES.text(options)
        combined = DEFAULT_COMBINED
        if combined_raw is not None:
            combined = tuple(n.strip() for n in combined_raw.split(",") if n.strip())
            if any("/" in n for n in combined):
                raise ProviderConstructionError(
                    "ATTRIBUTION_KERNEL_LOG_COMBINED_FILES must list plain file names, separated by commas"
                )
        source = FileSource(root, combined)
    elif kind == "loki":
        url = LOKI_URL.text(options)
        if url is None:
            raise ProviderConstructionError("ATTRIBUTION_LOKI_URL is not set (required with the loki source)")
        if not re.match(r"^https?://[^/\s]+", url):
            raise ProviderConstructionError(f"ATTRIBUTION_LOKI_URL={url!r} is not an http:// or https:// URL")
        selector = LOKI_SELECTOR.text(options) or str(LOKI_SELECTOR.default)
        try:
            source = LokiSource(url, selector=selector, **_paging(options), concurrency=_int(options, LOKI_CONCURRENCY))
        except TemplateError as exc:
            raise ProviderConstructionError(f"ATTRIBUTION_LOKI_SELECTOR={selector!r} cannot be used: {exc}") from exc
    elif kind == "journal":
        source = JournalSource(_directory(options, JOURNAL_DIR))
    else:
        raise ProviderConstructionError(
            f"ATTRIBUTION_KERNEL_LOG_SOURCE={kind!r} is unknown: choose 'files', 'loki' or 'journal'"
        )
    epilog_dir = None
    if EPILOG_DIR.text(options) is not None:
        epilog_dir = _directory(options, EPILOG_DIR)
    flight_recorder_dir = None
    if FLIGHT_RECORDER_DIR.text(options) is not None:
        flight_recorder_dir = _directory(options, FLIGHT_RECORDER_DIR)
    return Settings(
        source=source,
        lookback=timedelta(seconds=_int(options, LOOKBACK)),
        grace=timedelta(seconds=_int(options, GRACE)),
        max_evidence=_int(options, MAX_EVIDENCE_SETTING),
        epilog_dir=epilog_dir,
        time_zone=_zone(options, TIME_ZONE),
        job_logs=_job_logs(options),
        flight_recorder_dir=flight_recorder_dir,
        flight_recorder_max_file_bytes=_int(options, FLIGHT_RECORDER_MAX_FILE_BYTES),
        scan_process=_int(options, SCAN_PROCESS) == 1,
    )


def _job_logs(options: Mapping[str, str]) -> JobLogSource | None:
    """The job-log source of ATTRIBUTION_JOB_LOG_DIR or ATTRIBUTION_LOKI_JOB_SELECTOR (at most one), or None."""
    directory = JOB_LOG_DIR.text(options)
    template = LOKI_JOB_SELECTOR.text(options)
    limits = ReadLimits(
        node_bytes=_int(options, JOB_LOG_MAX_NODE_BYTES),
        request_bytes=_int(options, JOB_LOG_MAX_REQUEST_BYTES),
    )
    if directory is not None and template is not None:
        raise ProviderConstructionError(
            "ATTRIBUTION_JOB_LOG_DIR and ATTRIBUTION_LOKI_JOB_SELECTOR are both set: choose one job-log source"
        )
    if directory is not None:
        return FileJobLogSource(_directory(options, JOB_LOG_DIR), limits)
    if template is None:
        return None
    problem = template_problem(template)
    if problem is not None:
        raise ProviderConstructionError(f"ATTRIBUTION_LOKI_JOB_SELECTOR {problem}")
    url = LOKI_URL.text(options)
    if url is None or not re.match(r"^https?://[^/\s]+", url):
        raise ProviderConstructionError(
            "ATTRIBUTION_LOKI_JOB_SELECTOR needs ATTRIBUTION_LOKI_URL, an http:// or https:// URL"
        )
    concurrency = _int(options, LOKI_CONCURRENCY)
    return LokiJobLogSource(url, template, limits=limits, concurrency=concurrency, **_paging(options))
