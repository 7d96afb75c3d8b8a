"""Kernel log sources: each reads the window's lines of the scope's nodes into a Collector."""

from __future__ import annotations

from typing import Protocol

from providers.base import Deadline, TraceContext
from providers.telemetry.kernel.collect import Collector


class LogSource(Protocol):
    """A place kernel log lines come from."""

    #: the Evidence.source token of its lines
    evidence_source: str

    def scan(self, collector: Collector, deadline: Deadline, trace: TraceContext | None) -> None:
        """Feed every line of the collector's nodes around its window into it; raise Provider*Error on failure."""
        ...
