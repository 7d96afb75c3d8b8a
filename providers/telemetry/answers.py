"""Fast answers over local log files kept for the same scope and window while the files stay unchanged.

A fast request repeated (a caller's retry, a second replica of the caller, an operator asking again) gets the
answer a new scan would give: it is taken from here only when every folder the first scan listed and every file it
read still has the identity it had (`Proof.holds`), and kept only when nothing was left unread (an unreadable file
is read, and warned about, again at every request).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from providers.base import Finding, ProviderError, Target
from providers.telemetry.cache import Bounded
from providers.telemetry.kernel.sources.facts import Proof
from providers.telemetry.window import Window

#: answers kept (least recently used dropped first)
ANSWER_ENTRIES = 128
#: a scope of more nodes is not kept (its key alone would hold every name)
MAX_KEPT_NODES = 64
#: an answer whose key, proof and findings take more than about this many bytes is not kept (one over 64 nodes, a
#: folder and two files each, takes about 100 KiB): with ANSWER_ENTRIES, the kept answers hold at most about 16 MiB
MAX_ANSWER_BYTES = 128 * 1024
#: what an item of a proof, a finding, an evidence item or a target is counted, besides its texts
ITEM_BYTES = 256

Answer = tuple[tuple[Finding, ...], tuple[Target, ...], ProviderError | None]
#: the scope's nodes and the window's start and end
Key = tuple[tuple[str, ...], datetime, datetime]


class AnswerCache:
    """(scope nodes, window start, window end) -> (Proof, answer); thread-safe, bounded by ANSWER_ENTRIES."""

    def __init__(self, entries: int | None = None) -> None:
        self.entries = ANSWER_ENTRIES if entries is None else entries
        self._items: Bounded[Key, tuple[Proof, Answer]] = Bounded(self.entries)

    def key(self, nodes: Sequence[str], window: Window) -> Key | None:
        """The key of a scope's answer, or None when an answer over this many nodes is not kept."""
        if self.entries <= 0 or len(nodes) > MAX_KEPT_NODES:
            return None
        return (tuple(nodes), window.start, window.end)

    def get(self, key: Key) -> Answer | None:
        item = self._items.peek(key)
        if item is None:
            return None
        proof, answer = item
        if not proof.holds():
            self._items.pop(key, only=item)
            return None
        self._items.get(key)  # the most recently used now
        return answer

    def put(self, key: Key, proof: Proof, answer: Answer) -> None:
        if not proof.sound or _size(key, proof, answer) > MAX_ANSWER_BYTES:
            return
        self._items.put(key, (proof, answer))


def _size(key: Key, proof: Proof, answer: Answer) -> int:
    """About how many bytes an answer kept under `key` holds: its texts, and ITEM_BYTES for each item."""
    findings, targets, error = answer
    size = sum(map(len, key[0])) + ITEM_BYTES * (len(key[0]) + len(proof.items) + len(findings) + len(targets))
    size += sum(len(path) for path, _ in proof.items)
    size += sum(len(e.message) + ITEM_BYTES for f in findings for e in f.evidence)
    return size + (0 if error is None else len(error.message))
