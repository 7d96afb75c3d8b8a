"""Fast answers over local log files kept for the same scope and window while the files stay unchanged.

A fast request repeated (a caller's retry, a second replica of the caller, an operator asking again) gets the
answer a new scan would give: it is taken from here only when every folder the first scan listed and every file it
read still has the identity it had (`Proof.holds`), and kept only when nothing was left unread (an unreadable file
is read, and warned about, again at every request).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from providers.base import Finding, ProviderError, Target
from providers.kernel_log.collect import Window
from providers.kernel_log.sources.facts import Proof

#: answers kept (least recently used dropped first)
ANSWER_ENTRIES = 256
#: a scope of more nodes is not kept (its key alone would hold every name)
MAX_KEPT_NODES = 64
#: a scan that listed and read more folders and files than this is not kept
MAX_PROOF_ITEMS = 1024

Answer = tuple[tuple[Finding, ...], tuple[Target, ...], ProviderError | None]


class AnswerCache:
    """(scope nodes, window) -> (Proof, answer); thread-safe, bounded by ANSWER_ENTRIES."""

    def __init__(self, entries: int | None = None) -> None:
        self.entries = ANSWER_ENTRIES if entries is None else entries
        self._items: OrderedDict[tuple[tuple[str, ...], Window], tuple[Proof, Answer]] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, nodes: Sequence[str], window: Window) -> tuple[tuple[str, ...], Window] | None:
        """The key of a scope's answer, or None when an answer over this many nodes is not kept."""
        if self.entries <= 0 or len(nodes) > MAX_KEPT_NODES:
            return None
        return (tuple(nodes), window)

    def get(self, key: tuple[tuple[str, ...], Window]) -> Answer | None:
        with self._lock:
            item = self._items.get(key)
        if item is None:
            return None
        proof, answer = item
        if not proof.holds():
            with self._lock:
                if self._items.get(key) is item:
                    del self._items[key]
            return None
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
        return answer

    def put(self, key: tuple[tuple[str, ...], Window], proof: Proof, answer: Answer) -> None:
        if not proof.sound or len(proof.items) > MAX_PROOF_ITEMS:
            return
        with self._lock:
            self._items[key] = (proof, answer)
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)
