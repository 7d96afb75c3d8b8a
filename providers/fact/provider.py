"""FactProvider: failure attribution by FACT, through the private generated client `fact_client`."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from providers.base import (
    MAX_EVIDENCE,
    AttributionOutcome,
    AttributionRequest,
    CheckReport,
    Deadline,
    ErrorType,
    Provider,
    ProviderConstructionError,
    ProviderError,
    ProviderProcessingError,
    ProviderTimeoutError,
    SourceFailure,
    TraceContext,
)
from providers.fact.client import PRINTABLE_ATTRIBUTOR_ID, FactClient, translate
from providers.settings import Setting, SettingError

log = logging.getLogger("attribution_adapter.providers.fact")

ENDPOINT_SETTING = Setting(
    "ATTRIBUTION_FACT_ENDPOINT", "the FACT service's http(s) URL", unset="(required for `fact`)"
)
MAX_EVIDENCE_SETTING = Setting(
    "ATTRIBUTION_FACT_MAX_EVIDENCE", "FACT symptoms kept as evidence per finding; 0 keeps none", 8, 0, MAX_EVIDENCE
)
ENDPOINT = ENDPOINT_SETTING.name
#: every setting this provider reads (the registry checks `ATTRIBUTION_*` names against it at boot; a test checks
#: the README's table against it)
SETTINGS: tuple[Setting, ...] = (ENDPOINT_SETTING, MAX_EVIDENCE_SETTING)
MISSING_PACKAGE = (
    "the fact provider needs the private package fact_client, which is not installed; "
    "see the optional deployment guide, docs/deploy.md"
)
MSG_FAILED = "FACT failed while attributing the failure"
MSG_TIMEOUT = "FACT did not answer in time"
MSG_NO_WINDOW = "the slow phase needs the epilog window: scope.start_time and scope.end_time"
MSG_NO_ATTRIBUTOR = "the session carries no FACT attributor id to continue; start a new one with a fast request"


def _endpoint(options: Mapping[str, str]) -> str:
    raw = ENDPOINT_SETTING.text(options) or ""
    if not raw:
        raise ProviderConstructionError(f"{ENDPOINT} is not set: the fact provider needs FACT's http(s) URL")
    # The value is not echoed: an operator may have put credentials in it.
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ProviderConstructionError(f"{ENDPOINT} is not a valid http(s) URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in raw):
        raise ProviderConstructionError(f"{ENDPOINT} is not a valid http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise ProviderConstructionError(f"{ENDPOINT} must not carry credentials; configure them in fact_client")
    return raw


def _max_evidence(options: Mapping[str, str]) -> int:
    try:
        return MAX_EVIDENCE_SETTING.integer(options)
    except SettingError as exc:
        raise ProviderConstructionError(str(exc)) from None


def _import_client_package() -> Any:
    try:
        return importlib.import_module("fact_client")
    except ModuleNotFoundError as exc:
        if exc.name == "fact_client":
            raise ProviderConstructionError(MISSING_PACKAGE) from None
        raise ProviderConstructionError(
            f"the private package fact_client is installed but needs the missing module {exc.name}; see docs/deploy.md"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a broken private package must stop the boot with a clear message
        raise ProviderConstructionError(
            f"the private package fact_client failed to import ({type(exc).__name__}); see docs/deploy.md"
        ) from None


class FactProvider(Provider):
    """Asks FACT which node, or the job's resources as a whole, a training failure can be attributed to."""

    name = "fact"

    def __init__(
        self,
        client: FactClient,
        timeout_errors: tuple[type[BaseException], ...],
        max_evidence: int,
        version: str = "unknown",
    ) -> None:
        self.client = client
        self.timeout_errors = timeout_errors
        self.max_evidence = max_evidence
        self.version = version

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> FactProvider:
        # The package first: it is what a public installation lacks, and here only, so importing this module never
        # needs it.
        package = _import_client_package()
        endpoint, max_evidence = _endpoint(options), _max_evidence(options)
        client_class = getattr(package, "Client", None)
        if not callable(client_class):
            raise ProviderConstructionError("the installed fact_client has no Client; see docs/deploy.md")
        try:
            client = client_class(endpoint=endpoint)
        except Exception as exc:  # noqa: BLE001 - the client's own text may hold the endpoint or credentials
            raise ProviderConstructionError(
                f"fact_client could not build a client for {ENDPOINT} ({type(exc).__name__})"
            ) from None
        timeout_error = getattr(package, "TimeoutError", None)
        timeouts: tuple[type[BaseException], ...] = (TimeoutError,)
        if isinstance(timeout_error, type) and issubclass(timeout_error, BaseException):
            timeouts += (timeout_error,)
        version = getattr(package, "__version__", None)
        return cls(client, timeouts, max_evidence, version if isinstance(version, str) and version else "unknown")

    def _ask(
        self, call: Callable[..., object], deadline: Deadline, trace: TraceContext | None, **arguments: Any
    ) -> object:
        if deadline.expired:
            raise ProviderTimeoutError(MSG_TIMEOUT)
        headers = trace.headers() if trace is not None else {}
        try:
            return call(timeout=deadline.remaining(), headers=headers, **arguments)
        except self.timeout_errors:
            raise ProviderTimeoutError(MSG_TIMEOUT) from None
        except Exception as exc:  # noqa: BLE001 - the client's text may carry log excerpts or credentials
            log.warning("FACT call failed: %s", type(exc).__name__)
            # Transport failures of an HTTP client are OSErrors (ConnectionError, requests' ConnectionError).
            kind = SourceFailure.UNREACHABLE if isinstance(exc, OSError) else SourceFailure.OTHER
            raise ProviderProcessingError(MSG_FAILED, kind=kind) from None

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        result = self._ask(
            self.client.start_attribution,
            deadline,
            trace,
            workload_id=request.workload_id,
            nodes=list(request.scope.nodes),
            ranks=list(request.scope.ranks),
            detected_at=request.failure_context.detected_at,
            detection_signal=request.failure_context.detection_signal,
        )
        return translate(result, request, self.max_evidence)

    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        attributor_id = session_state.get("attributor_id")
        start, end = request.scope.start_time, request.scope.end_time
        # The state arrives inside a caller-supplied session id: treat it as input, not as trusted data.
        if not isinstance(attributor_id, str) or not PRINTABLE_ATTRIBUTOR_ID.fullmatch(attributor_id):
            return AttributionOutcome(error=ProviderError(ErrorType.NO_ATTRIBUTION_AVAILABLE, MSG_NO_ATTRIBUTOR))
        if start is None or end is None:  # the app never calls without a window; stay safe when called directly
            return AttributionOutcome(error=ProviderError(ErrorType.NO_ATTRIBUTION_AVAILABLE, MSG_NO_WINDOW))
        result = self._ask(
            self.client.continue_attribution,
            deadline,
            trace,
            attributor_id=attributor_id,
            start_time=start,
            end_time=end,
        )
        return translate(result, request, self.max_evidence)

    def check(self, deadline: Deadline) -> CheckReport:
        """Construction is all that can be checked: whether FACT answers can only be seen by calling it."""
        return CheckReport(
            checked=False,
            summary=(
                "the fact provider was built: fact_client is installed and ATTRIBUTION_FACT_ENDPOINT is valid; "
                "whether FACT answers cannot be checked without calling it, which check does not do"
            ),
        )

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()
