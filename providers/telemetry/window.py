"""The time window a request reads: every signal's reader takes its lines around the failure within it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from providers.base import AttributionRequest, shifted


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def middle(self) -> datetime:
        return self.start + (self.end - self.start) / 2


def fast_window(request: AttributionRequest, lookback: timedelta, grace: timedelta) -> Window | None:
    """[detected_at - lookback, detected_at + grace] cut to the scope's times; None when nothing is left.

    Near year 1 or 9999 the window is clipped to the representable range.
    """
    detected = request.failure_context.detected_at
    start = shifted(detected, -lookback)
    end = shifted(detected, grace)
    if request.scope.start_time is not None:
        start = max(start, request.scope.start_time)
    if request.scope.end_time is not None:
        end = min(end, request.scope.end_time)
    return Window(start, end) if start < end else None
