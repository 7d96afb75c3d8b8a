"""Literal texts searched for in a buffer at once: one Hyperscan database of them, every match reported with the
index of its text (the job-log reader's markers, the kernel blocks' keywords).

A Hyperscan scan of a buffer costs about what reading it costs, whatever the number of texts: the kernel's five
keywords, each looked for by `bytes.find`, took 52 us in a 16 KiB block, the one scan 4 us (a block of
bench/fleet.py's kernel tree, 2026-12-06). Each thread scans with its own scratch space.

A text of one byte is the exception: in the job-log reader's database the two of them (`\x1b`, `\x00`) made every
scan of a 64 KiB tail take 93-95 us instead of 66-68 (2026-12-07), so such texts are found by `bytes.find` (memchr,
about 3 us a tail where the byte is absent) and their matches merged with the database's.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import hyperscan


def literal(text: str) -> bytes:
    """A literal text as a Hyperscan expression: every byte but ASCII letters and digits written `\\xNN`."""
    return "".join(c if c.isascii() and c.isalnum() else "".join(f"\\x{b:02x}" for b in c.encode())
                   for c in text).encode()


class Literals:
    """The texts `words` (each a literal, none empty), compiled once; `ends` scans a buffer for all of them."""

    def __init__(self, words: Sequence[str]) -> None:
        if not words or not all(words):
            raise ValueError("a literal search needs texts, none of them empty")
        encoded = [w.encode() for w in words]
        self.lengths = tuple(len(e) for e in encoded)
        #: (the byte, its index) of each one-byte text, found apart
        self._bytes = [(e, i) for i, e in enumerate(encoded) if len(e) == 1]
        longer = [i for i, e in enumerate(encoded) if len(e) > 1]
        self._database: hyperscan.Database | None = None
        if longer:
            self._database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            self._database.compile(expressions=[literal(words[i]) for i in longer], ids=longer, flags=0)
            self._scratch = hyperscan.Scratch(self._database)
        self._local = threading.local()

    def _thread_scratch(self) -> hyperscan.Scratch:
        # a scratch space serves one scan at a time: each thread has its own
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._scratch.clone()
        return scratch

    def ends(self, data: bytes) -> list[tuple[int, int]]:
        """Every match in `data` as (where it ends, the index of its text in `words`), sorted."""
        found: list[tuple[int, int]] = []
        add = found.append

        def on_match(ident: int, _start: int, end: int, _flags: int, _context: object) -> None:
            add((end, ident))

        if self._database is not None:
            self._database.scan(data, match_event_handler=on_match, scratch=self._thread_scratch())
        for byte, ident in self._bytes:
            at = data.find(byte)
            while at >= 0:
                add((at + 1, ident))
                at = data.find(byte, at + 1)
        found.sort()
        return found


__all__ = ["Literals", "literal"]
