"""Bounds of a 422 answer: how many problems are listed, per field and in all, and how long each text may be.

A request can break a rule in hundreds of thousands of places (every item of `scope.ranks`, every key of an
object); listing each would let one caller make the service build and send a body many times larger than the
request. Past these bounds problems are counted, not listed, and one summary entry says how many more were found.
"""

from __future__ import annotations

MAX_PROBLEMS_PER_FIELD = 16  # items of one array, unknown keys of one object
MAX_PROBLEMS = 64  # in one 422 body, before its final summary entry
MAX_MESSAGE_CHARS = 256  # each `msg`
MAX_LOC_CHARS = 64  # each string step of a `loc` (an unknown key is caller input)


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` code points, ending in `…` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
