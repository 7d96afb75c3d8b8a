"""Literal texts searched for in a buffer at once: one Hyperscan database of them, every match reported with the
index of its text (the job-log reader's markers, the kernel blocks' keywords).

A Hyperscan scan of a buffer costs about what reading it costs, whatever the number of texts: the kernel's five
keywords, each looked for by `bytes.find`, took 52 us in a 16 KiB block, the one scan 4 us (a block of
bench/fleet.py's kernel tree, 2026-12-06). The search is the compiled `_literals` (`_literals.c`, over Debian's
Vectorscan library, libhs): its matches are kept in C and handed over once, sorted. Through a binding that calls a
Python function for each match and takes the interpreter lock for it, a 64 KiB tail of bench/fleet_jobs.py's job logs
(51 matches) took 44.7 us; kept in C, 21.7 us (2026-12-07).

A text of one byte is the exception: in the job-log reader's database the two of them (`\x1b`, `\x00`) made every
scan of a 64 KiB tail take 93-95 us instead of 66-68 (2026-12-07, through that binding; through the compiled search
72-73 us instead of 45-48, 2026-12-08), so such texts are found by `memchr` (about 3 us a tail where the byte is
absent) and their matches merged with the database's.
"""

from __future__ import annotations

from collections.abc import Sequence

from providers.telemetry.compiled import compiled

_search = compiled("providers.telemetry._literals").Search


class Literals:
    """The texts `words` (each a literal, none empty), compiled once; `ends` scans a buffer for all of them."""

    def __init__(self, words: Sequence[str]) -> None:
        if not words or not all(words):
            raise ValueError("a literal search needs texts, none of them empty")
        encoded = tuple(w.encode() for w in words)
        self.lengths = tuple(len(e) for e in encoded)
        #: every match in a buffer as (where it ends, the index of its text in `words`), sorted
        self.ends = _search(encoded).ends


__all__ = ["Literals"]
