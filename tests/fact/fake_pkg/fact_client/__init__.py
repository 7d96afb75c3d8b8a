"""A scripted stand-in for the private FACT client, put on sys.path only by the tests in tests/fact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from tests.fact_results import Attribution, Symptom, Verdict  # noqa: F401 - the client's result types

__version__ = "9.9.0-fake"


class TimeoutError(Exception):  # noqa: A001 - the real client names its timeout like this
    """FACT did not answer within the call's timeout."""


# The script: tests append answers (results, or exceptions to raise) and read the calls. The module is dropped
# from sys.modules around every test, so each test starts from these empty values.
ANSWERS: dict[str, list[object]] = {"start": [], "continue": []}
CALLS: list[tuple[str, dict[str, object]]] = []
CLIENTS: list[Client] = []
CONSTRUCTOR_ERROR: Exception | None = None


class Client:
    def __init__(self, endpoint: str) -> None:
        if CONSTRUCTOR_ERROR is not None:
            raise CONSTRUCTOR_ERROR
        self.endpoint = endpoint
        self.closed = False
        CLIENTS.append(self)

    def start_attribution(
        self,
        *,
        workload_id: str,
        nodes: Sequence[str],
        ranks: Sequence[int],
        detected_at: datetime,
        detection_signal: str,
        timeout: float,
        headers: Mapping[str, str],
    ) -> object:
        arguments = dict(workload_id=workload_id, nodes=nodes, ranks=ranks, detected_at=detected_at)
        arguments |= dict(detection_signal=detection_signal, timeout=timeout, headers=dict(headers))
        return self._answer("start", arguments)

    def continue_attribution(
        self,
        *,
        attributor_id: str,
        start_time: datetime,
        end_time: datetime,
        timeout: float,
        headers: Mapping[str, str],
    ) -> object:
        arguments = dict(attributor_id=attributor_id, start_time=start_time, end_time=end_time)
        arguments |= dict(timeout=timeout, headers=dict(headers))
        return self._answer("continue", arguments)

    def close(self) -> None:
        self.closed = True

    def _answer(self, call: str, arguments: dict[str, object]) -> object:
        CALLS.append((call, arguments))
        if not ANSWERS[call]:
            raise LookupError(f"no scripted answer for {call}")
        answer = ANSWERS[call].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer
