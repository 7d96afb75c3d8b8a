"""The request flow after validation: phase and session rules, the bounded provider call, the contract guard."""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from app.guard import ContractViolation, check_outcome, public_message
from app.sessions import InvalidSession, SessionCodec, SessionTooLarge
from providers.base import (
    AttributionOutcome,
    AttributionRequest,
    Deadline,
    ErrorType,
    Phase,
    Provider,
    ProviderConstructionError,
    ProviderError,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
)

log = logging.getLogger("attribution_adapter.service")

MSG_SESSION_INVALID = "continue_session is not a valid session for this workload; start a new one with a fast request"
MSG_WINDOW_MISSING = "the slow phase needs the epilog window: scope.start_time and scope.end_time"
MSG_TIMEOUT = "the provider did not answer within timeout_ms"
MSG_PROCESSING = "the provider failed while processing the request"
MSG_VIOLATION = "the provider's answer broke the contract and was discarded"
MSG_SESSION_TOO_LARGE = "the provider's session state does not fit in a session id"


@dataclass(frozen=True)
class Result:
    outcome: AttributionOutcome
    session_id: str | None

    @property
    def label(self) -> str:
        """`ok` or the `error.type`: a bounded value for logs and metrics."""
        return "ok" if self.outcome.error is None else self.outcome.error.type.value


def _error(kind: ErrorType, message: str) -> AttributionOutcome:
    return AttributionOutcome(error=ProviderError(kind, message))


class AttributionService:
    """Runs one phase of one request against the provider, within the request's deadline."""

    def __init__(
        self,
        provider: Provider,
        sessions: SessionCodec,
        concurrency: int,
        on_provider_call: Callable[[str, float], None] | None = None,
        on_source_failure: Callable[[str], None] | None = None,
        call_in_flight: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.provider = provider
        self.sessions = sessions
        self.concurrency = concurrency
        self.on_provider_call = on_provider_call
        self.on_source_failure = on_source_failure or (lambda kind: None)
        self.call_in_flight = call_in_flight
        self._executor: ThreadPoolExecutor | None = None
        self._executor_pid = 0
        self._lock = threading.Lock()

    def _pool(self) -> ThreadPoolExecutor:
        # Threads do not survive fork: a worker forked from a preloading master builds its own pool.
        pid = os.getpid()
        with self._lock:
            if self._executor is None or self._executor_pid != pid:
                self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="provider-call")
                self._executor_pid = pid
            return self._executor

    def after_fork(self, descriptors: Sequence[int] = ()) -> None:
        """In a server's worker, right after it was forked (one thread): the provider's hook (Provider.after_fork)."""
        self.provider.after_fork(descriptors)

    def close(self) -> None:
        """At process exit: drop queued provider calls, then let the provider release what it holds."""
        with self._lock:
            if self._executor is not None and self._executor_pid == os.getpid():
                self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self.provider.close()

    def handle(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> Result:
        if request.phase is Phase.FAST:
            outcome = self._call(lambda: self.provider.fast(request, deadline, trace), request, deadline)
            try:
                session_id: str | None = self.sessions.issue(request, outcome.session_state)
            except SessionTooLarge as exc:
                log.warning("session not issued: %s", exc)
                return Result(_error(ErrorType.SERVICE_ERROR, MSG_SESSION_TOO_LARGE), None)
            return Result(outcome, session_id)

        given = request.continue_session or ""
        try:
            state = self.sessions.open(given, request)
        except InvalidSession as exc:
            log.info("slow phase refused: session %s", exc.reason)
            return Result(_error(ErrorType.NO_ATTRIBUTION_AVAILABLE, MSG_SESSION_INVALID), given)
        if request.scope.start_time is None or request.scope.end_time is None:
            return Result(_error(ErrorType.NO_ATTRIBUTION_AVAILABLE, MSG_WINDOW_MISSING), given)
        outcome = self._call(lambda: self.provider.slow(request, state, deadline, trace), request, deadline)
        return Result(outcome, given)

    def _in_flight(self, call: Callable[[], AttributionOutcome]) -> AttributionOutcome:
        with self.call_in_flight():
            return call()

    def _run(self, call: Callable[[], AttributionOutcome], deadline: Deadline) -> AttributionOutcome:
        """The provider's answer; _PastDeadline when the Adapter stopped waiting for it."""
        if self.provider.keeps_deadline:
            # The provider bounds its own work by the deadline: no hand-off to another thread.
            return self._in_flight(call)
        # A copy of the request's context: the provider's log lines carry the request id (app.logs).
        future: Future[AttributionOutcome] = self._pool().submit(
            contextvars.copy_context().run, self._in_flight, call
        )
        try:
            return future.result(timeout=deadline.remaining())
        except FutureTimeout:
            if future.done():
                raise  # the provider's own TimeoutError (in 3.11 the same class), handled as a backend timeout
            future.cancel()  # a call still queued never starts; one that runs goes on in the background
            raise _PastDeadline from None

    def _call(
        self, call: Callable[[], AttributionOutcome], request: AttributionRequest, deadline: Deadline
    ) -> AttributionOutcome:
        """The provider's answer, checked; every failure becomes a typed error. Construction failures propagate.

        Whatever the provider answered, an answer that came after the deadline is a `timeout`: the caller asked
        for an answer within `timeout_ms`, and a late success must not look like a timely one.
        """
        started = time.monotonic()
        try:
            answer = self._run(call, deadline)
        except _PastDeadline:
            log.warning("provider call passed timeout_ms=%d", request.timeout_ms)
            return _error(ErrorType.TIMEOUT, MSG_TIMEOUT)
        except ProviderConstructionError:
            raise
        except TimeoutError:
            # A builtin TimeoutError (a socket timeout, say): a backend that did not answer in time.
            log.warning("provider backend timed out: TimeoutError")
            self.on_source_failure("timeout")
            return _error(ErrorType.TIMEOUT, MSG_TIMEOUT)
        except ProviderTimeoutError as exc:
            log.warning("provider backend timed out: %s", type(exc).__name__)
            self.on_source_failure(exc.kind)
            return _error(ErrorType.TIMEOUT, public_message(str(exc), MSG_TIMEOUT))
        except ProviderProcessingError as exc:
            if deadline.expired:
                return self._late(request)
            log.warning("provider processing failed: %s", type(exc).__name__)
            self.on_source_failure(exc.kind)
            return _error(ErrorType.SERVICE_ERROR, public_message(str(exc), MSG_PROCESSING))
        except Exception as exc:  # noqa: BLE001 - any provider failure is a typed error, never a 5xx
            if deadline.expired:
                return self._late(request)
            log.error("provider raised %s", type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
            self.on_source_failure("other")
            return _error(ErrorType.SERVICE_ERROR, MSG_PROCESSING)
        finally:
            if self.on_provider_call is not None:
                self.on_provider_call(request.phase.value, time.monotonic() - started)
        if deadline.expired:
            return self._late(request)
        try:
            return check_outcome(answer, request.scope)
        except ContractViolation as exc:
            log.warning("provider answer discarded: %s", exc)
            return _error(ErrorType.SERVICE_ERROR, MSG_VIOLATION)

    @staticmethod
    def _late(request: AttributionRequest) -> AttributionOutcome:
        log.warning("provider answered after timeout_ms=%d; the answer is a timeout", request.timeout_ms)
        return _error(ErrorType.TIMEOUT, MSG_TIMEOUT)


class _PastDeadline(Exception):
    """The deadline passed while the Adapter waited for the provider on its pool."""
