"""The load tests' provider, loaded by gunicorn as `ATTRIBUTION_PROVIDER=tests.load.provider:from_options`.

Every call waits `ATTRIBUTION_LOAD_DELAY_MS` (default 5); a request whose `workload_id` starts with `slow-` waits
`ATTRIBUTION_LOAD_SLOW_DELAY_MS` (default 400) instead, so one server has both quick and slow provider calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from providers.base import AttributionOutcome, AttributionRequest, Deadline, Provider, TraceContext
from tests.fakes import first_node_finding


class LoadProvider(Provider):
    name = "load-fake"
    version = "1"

    def __init__(self, delay_s: float, slow_delay_s: float) -> None:
        self.delay_s = delay_s
        self.slow_delay_s = slow_delay_s

    def _wait(self, request: AttributionRequest) -> None:
        time.sleep(self.slow_delay_s if request.workload_id.startswith("slow-") else self.delay_s)

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        self._wait(request)
        return first_node_finding(request)

    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        self._wait(request)
        outcome = first_node_finding(request)
        return AttributionOutcome(attributions=outcome.attributions, unattributed_targets=outcome.unattributed_targets)


#: the variables `from_options` reads, declared so that boot refuses any other `ATTRIBUTION_*` name
SETTINGS = ("ATTRIBUTION_LOAD_DELAY_MS", "ATTRIBUTION_LOAD_SLOW_DELAY_MS")


def from_options(options: Mapping[str, str]) -> Provider:
    return LoadProvider(
        int(options.get("ATTRIBUTION_LOAD_DELAY_MS", "5")) / 1000.0,
        int(options.get("ATTRIBUTION_LOAD_SLOW_DELAY_MS", "400")) / 1000.0,
    )
