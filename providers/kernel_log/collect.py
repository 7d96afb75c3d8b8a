"""The collector: what sources feed their lines into, tracking per-node telemetry and classified events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from providers.kernel_log.parse import Classifier, Event

#: the syslog tag / APP-NAME of kernel lines; other programs' lines are never classified (anyone can `logger`
#: a fake "NVRM: Xid" line from user space)
KERNEL_TAG = "kernel"


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime


@dataclass
class Collector:
    """Receives parsed lines of in-scope hosts from a source and keeps what attribution needs."""

    nodes: Iterable[str]
    window: Window
    lines_in_window: dict[str, int] = field(default_factory=dict)
    seen_before: set[str] = field(default_factory=set)
    seen_after: set[str] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)
    bytes_read: int = 0
    truncated: bool = False

    def __post_init__(self) -> None:
        # Hostnames compare case-insensitively (RFC 1035); findings use the scope's spelling.
        self._by_lower = {n.lower(): n for n in self.nodes}
        self._classifier = Classifier()
        self._event_keys: set[tuple[str, datetime, str]] = set()

    def node_for(self, host: str | None) -> str | None:
        """The scope node a hostname names, or None."""
        if not host:
            return None
        return self._by_lower.get(host.lower())

    def add(self, node: str, observed_at: datetime, message: str, raw: str, tag: str | None) -> None:
        """Take one line of the scope node `node` (any time; lines outside the window only show coverage)."""
        if observed_at < self.window.start:
            self.seen_before.add(node)
            return
        if observed_at > self.window.end:
            self.seen_after.add(node)
            return
        self.lines_in_window[node] = self.lines_in_window.get(node, 0) + 1
        if tag is not None and tag.lower() != KERNEL_TAG:
            return
        event = self._classifier.feed(node, observed_at, message, raw)
        if event is None or event.category is None:
            return
        key = (node, observed_at, event.line)
        # The same line may sit in two files of one host (kern.log and syslog); count it once.
        if key not in self._event_keys:
            self._event_keys.add(key)
            self.events.append(event)

    def has_telemetry(self, node: str) -> bool:
        """A node had telemetry when a line of it fell in the window, or its log was seen to span the window."""
        return node in self.lines_in_window or (node in self.seen_before and node in self.seen_after)
