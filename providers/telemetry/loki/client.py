"""The one Loki client of the open provider: `GET /loki/api/v1/query_range` answers read within a deadline and a size
bound, their entries, and Loki's nanosecond times. The kernel source, the job-log source and `check` all read Loki
through it; each names itself in the errors (`source`).

A query asks for at most `limit` entries a page. Loki refuses a query asking more than its tenant's
`max_entries_limit_per_query` (5000 unless configured) with HTTP 400 and a message naming that bound
("max entries limit per query exceeded, limit > max_entries_limit_per_query (5000 > 1000)"): `get_json` reads such an
answer's first bytes and raises `EntriesOverLimit` with the bound; `EntryLimit.page` asks that page again once with
the bound and keeps asking for it in the source's later pages.

A Loki gateway that is busy answers 429 (rate limited) or 503, often with `Retry-After`. Each session made by
`session(deadline)` sends such a query again (urllib3's `Retry` on the session's adapter): after the wait the
gateway asks for, or a short backoff without one, at most `MAX_RETRIES` times, and never past the deadline: a wait
that would end after it is not slept; the query fails at once with the gateway's status, saying so. Every socket
wait (connect, each read) is bounded by the time left before the deadline when it starts, retries included.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from operator import itemgetter
from typing import Any

import orjson
import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
from urllib3.util.timeout import Timeout

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure
from providers.telemetry.compiled import compiled

#: the largest answer body read for one page; a Loki that sends more is answering something else
MAX_PAGE_BYTES = 32 * 1024 * 1024
READ_CHUNK = 64 * 1024
#: how errors name the source unless the caller names itself
SOURCE = "the Loki log source"

#: the bytes a URL query value keeps as they are (RFC 3986 unreserved); every other byte becomes %XX
_UNRESERVED = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"


def encoded_length(text: str) -> int:
    """The length of `text` once URL-encoded as a query value (what `urlencode(..., quote_via=quote)` writes)."""
    raw = text.encode("utf-8")
    kept = len(raw) - len(raw.translate(None, _UNRESERVED))
    return kept + 3 * (len(raw) - kept)


MAX_NS = 2**63 - 1
#: a Loki answer's entries checked and taken out (`read_entries`), in C: in Python, 0.6 us an entry
_read_streams = compiled("providers.telemetry.loki._entries").read
_TIME = itemgetter(1)

#: statuses after which a query is sent again: Loki's rate limit (429) and an overloaded or restarting backend (503)
RETRY_STATUSES = frozenset({429, 503})
#: further attempts of one query at most
MAX_RETRIES = 3
#: the backoff without `Retry-After`: urllib3 sends the first retry at once, then waits 0.2 s, 0.4 s
BACKOFF_FACTOR_S = 0.1
#: a wait is slept only when it ends at least this long before the deadline (the retried query needs time too)
RETRY_MARGIN_S = 0.05
#: the smallest socket timeout given (a zero would mean "no timeout" to some callers)
MIN_TIMEOUT_S = 0.001
#: the bytes of a 400 answer read for Loki's message (the message is short; the rest is not read)
ERROR_BODY_BYTES = 4096
#: Loki's refusal of a query asking for more entries than its tenant's bound, from its querier or query frontend
#: (the bound named `max_entries_limit` in some releases, `max_entries_limit_per_query` in others): the limit asked,
#: the bound
_ENTRIES_OVER_LIMIT = re.compile(
    rb"max entries limit per query exceeded, limit > max_entries_limit(?:_per_query)? \((\d{1,10}) > (\d{1,10})\)"
)


class EntriesOverLimit(ProviderProcessingError):
    """Loki refused a query for asking more entries a page than `bound`, its tenant's `max_entries_limit_per_query`."""

    def __init__(self, message: str, bound: int) -> None:
        super().__init__(message, kind=SourceFailure.UNREADABLE)
        self.bound = bound


class EntryLimit:
    """The entries a source asks for in a page: its setting, lowered to the bound Loki names when it refuses more
    (kept for the source's later queries); thread-safe."""

    def __init__(self, limit: int) -> None:
        self.value = limit
        self._lock = threading.Lock()

    def page(self, ask: Callable[[int], Any]) -> tuple[Any, int]:
        """`ask(limit)` for one page with the limit asked for now: (its answer, that limit). A page Loki refuses for
        asking more than its bound is asked again once with the bound, which later pages ask for too; a refusal
        naming no smaller bound (0, or not below what was asked), or a second one, stands."""
        limit = self.value
        try:
            return ask(limit), limit
        except EntriesOverLimit as refused:
            if not 0 < refused.bound < limit:
                raise
            with self._lock:
                self.value = min(self.value, refused.bound)
            return ask(refused.bound), refused.bound


class RetryPastDeadline(Exception):
    """The backend asked to wait longer than the deadline leaves: the query is not sent again."""

    def __init__(self, status: int, wait_s: float) -> None:
        super().__init__(f"HTTP {status}, retry after {wait_s:g} s")
        self.status = status
        self.wait_s = wait_s


class DeadlineRetry(Retry):
    """urllib3's `Retry` whose waits (`Retry-After` or backoff) never reach past a deadline."""

    deadline: Deadline | None = None

    def new(self, **kw: Any) -> DeadlineRetry:
        retry = super().new(**kw)
        retry.deadline = self.deadline
        return retry

    def sleep(self, response: Any = None) -> None:
        try:
            wait = self.get_retry_after(response) if response is not None else None
        except ValueError:  # a `Retry-After` of more digits than `int` reads (4,300): longer than any deadline
            raise RetryPastDeadline(getattr(response, "status", 0), math.inf) from None
        if wait is None:
            wait = self.get_backoff_time()
        left = self.deadline.remaining() if self.deadline is not None else float("inf")
        if wait + RETRY_MARGIN_S >= left:
            raise RetryPastDeadline(getattr(response, "status", 0), wait)
        if wait > 0:
            time.sleep(wait)


class DeadlineTimeout(Timeout):
    """A socket timeout that is the time left before the deadline, computed when each wait starts (the same
    object serves a query's retries, so a retry after a wait gets only what is left)."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(connect=MIN_TIMEOUT_S, read=MIN_TIMEOUT_S)
        self._deadline = deadline

    def _left(self) -> float:
        return max(MIN_TIMEOUT_S, self._deadline.remaining())

    def clone(self) -> DeadlineTimeout:
        return DeadlineTimeout(self._deadline)

    @property
    def connect_timeout(self) -> float:  # type: ignore[override]
        return self._left()

    @property
    def read_timeout(self) -> float:  # type: ignore[override]
        return self._left()


def session(deadline: Deadline) -> requests.Session:
    """A requests session whose queries are retried on 429 and 503 within `deadline` (see the module's text)."""
    retry = DeadlineRetry(
        total=MAX_RETRIES,
        connect=0,
        read=False,
        redirect=0,
        status=MAX_RETRIES,
        other=0,
        allowed_methods=frozenset({"GET"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=BACKOFF_FACTOR_S,
        raise_on_status=False,
        respect_retry_after_header=True,
    )
    retry.deadline = deadline
    out = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    out.mount("http://", adapter)
    out.mount("https://", adapter)
    return out


def _ns(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def ns_span(first: datetime, last: datetime) -> tuple[int, int] | None:
    """Loki's (start, exclusive end) in ns for the inclusive window first..last; None when it holds no instant.

    Loki's times are 64-bit nanoseconds since 1970: a window reaching toward year 1 or 9999 is clipped to them, and
    one wholly outside them holds no line.
    """
    start = max(0, _ns(first))
    end = min(_ns(last) + 1, MAX_NS)
    return (start, end) if end > start else None


def get_json(
    session: requests.Session,
    url: str,
    headers: dict[str, str],
    deadline: Deadline,
    params: dict[str, str | int] | None = None,
    source: str = SOURCE,
) -> Any:
    """One Loki answer as JSON, within the deadline; every failure a typed provider error naming `source`.

    A `url` that carries its query already (the sources encode it themselves, to keep every URL within a length) is
    sent as its path and that query string: requests then takes the query as written instead of parsing it again
    (0.9 ms for a batch's 3.3 KB query against 0.3 ms, 2026-12-08), and the same URL goes out."""
    if deadline.remaining() <= 0:
        raise ProviderTimeoutError(f"{source} did not answer in time")
    query: dict[str, str | int] | str | None = params
    if params is None and "?" in url:
        url, _, query = url.partition("?")
    try:
        timeout = DeadlineTimeout(deadline)
        with session.get(url, params=query, headers=headers, timeout=timeout, stream=True) as response:
            if response.status_code != 200:
                message = f"{source} answered HTTP {response.status_code}"
                if response.status_code == 400:
                    over = _ENTRIES_OVER_LIMIT.search(_error_body(response))
                    if over is not None:
                        raise EntriesOverLimit(message, int(over.group(2)))
                raise ProviderProcessingError(message, kind=SourceFailure.UNREADABLE)
            raw = _read_body(response, deadline, source)
    except RetryPastDeadline as exc:
        wait = f"{exc.wait_s:g} s" if math.isfinite(exc.wait_s) else "a wait of thousands of digits"
        raise ProviderProcessingError(
            f"{source} answered HTTP {exc.status} and asked to retry after {wait}, past the deadline",
            kind=SourceFailure.UNREADABLE,
        ) from exc
    except requests.Timeout as exc:
        raise ProviderTimeoutError(f"{source} did not answer in time") from exc
    except requests.RequestException as exc:
        raise ProviderProcessingError(f"{source} could not be reached", kind=SourceFailure.UNREACHABLE) from exc
    try:
        return orjson.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProviderProcessingError(
            f"{source} answered with an unreadable body", kind=SourceFailure.MALFORMED
        ) from exc


def _error_body(response: requests.Response) -> bytes:
    """The first ERROR_BODY_BYTES of an error answer, or nothing when they cannot be read."""
    try:
        return response.raw.read(ERROR_BODY_BYTES, decode_content=True) or b""
    except (urllib3.exceptions.HTTPError, OSError):
        return b""


def _read_body(response: requests.Response, deadline: Deadline, source: str) -> bytes:
    """The whole body, read piece by piece so neither the deadline nor MAX_PAGE_BYTES can be outrun.

    A timeout given to requests bounds each socket read, not the answer: a backend that trickles bytes would
    otherwise hold this call, its connection and a provider thread long after the caller got its `timeout`.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline.expired:
            raise ProviderTimeoutError(f"{source} did not answer in time")
        try:
            chunk = response.raw.read1(READ_CHUNK, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise ProviderTimeoutError(f"{source} did not answer in time") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ProviderProcessingError(
                f"{source} answered with an unreadable body", kind=SourceFailure.UNREACHABLE
            ) from exc
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_PAGE_BYTES:
            raise ProviderProcessingError(
                f"{source} answered with a page larger than 32 MiB", kind=SourceFailure.MALFORMED
            )
        chunks.append(chunk)


def results(body: Any, result_type: str, source: str = SOURCE) -> list[Any]:
    """The `data.result` list of a successful Loki answer of `result_type` (`streams`, `vector`); anything else is a
    ProviderProcessingError (malformed) naming `source`."""
    data = body.get("data") if isinstance(body, dict) and body.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != result_type or not isinstance(data.get("result"), list):
        raise ProviderProcessingError(f"{source} answered with an unreadable body", kind=SourceFailure.MALFORMED)
    return data["result"]


def read_entries(body: Any, host_label: str, source: str = SOURCE) -> tuple[list[tuple[str, int, str]], int]:
    """(host, ns timestamp, line) of every entry with a host label, in time order, and the count of all entries.

    Each stream a dict of labels and a list of values, each value a list of Loki's time (a count of nanoseconds in a
    signed 64-bit integer, written in ASCII digits) and the line (Loki 3 may add a third element, structured
    metadata); anything else is no Loki answer. Checked and taken out in C (`_entries.c`)."""
    streams = results(body, "streams", source)
    try:
        out, total = _read_streams(streams, host_label)
    except ValueError as exc:
        raise ProviderProcessingError(
            f"{source} answered with an unreadable body", kind=SourceFailure.MALFORMED
        ) from exc
    out.sort(key=_TIME)
    return out, total
