"""The job-log reader's candidate lines grouped in C (`prefilter.candidate_lines`, built from `_candidates.c`) against
the same grouping written in Python (`by_python`, below), on the search's own matches in real, generated and
mutated tails, and on matches given by hand.
"""

from __future__ import annotations

import random

import pytest

from providers.telemetry.joblog.prefilter import _SEARCH, REREAD, STRUCTURAL, candidate_lines
from providers.telemetry.joblog.signals import MARKERS
from tests.joblog.test_kind_lines import generated_line
from tests.joblog.test_prefilter import SUMMARY, _training


def by_python(data: bytes, found: list[tuple[int, int]], lengths: tuple[int, ...], deciding: bytes, markers: int):
    """What `candidate_lines` must give: the lines holding a match of a deciding word, each with its marks."""
    out = []
    head = tail = -1
    first = 0
    ids: list[int] = []
    low = high = 0
    candidate = False
    for index, (end, ident) in enumerate(found):
        start = end - lengths[ident]
        if start >= tail:  # a match on a later line (no word holds a newline)
            if candidate:
                out.append((head, tail, (tuple(ids), low - head, high - head, found[first:index], head, lengths)))
            head = data.rfind(b"\n", 0, start) + 1
            tail = data.find(b"\n", end)
            if tail < 0:
                tail = len(data)
            first, ids, low, high, candidate = index, [], tail, head, False
        if ident < markers:
            ids.append(ident)
            low, high = min(low, start), max(high, end)
        candidate = candidate or bool(deciding[ident])
    if candidate:
        out.append((head, tail, (tuple(ids), low - head, high - head, found[first:], head, lengths)))
    return out


def _check(data: bytes) -> list:
    found = _SEARCH.literals.ends(data)
    want = by_python(data, found, _SEARCH.lengths, _SEARCH.deciding, _SEARCH.markers)
    assert candidate_lines(data, found, _SEARCH.lengths, _SEARCH.deciding, _SEARCH.markers) == want
    assert _SEARCH.lines(data) == want
    return want


def _mutated(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(1, 12)):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(3)
        if kind == 0:
            out[at:at] = rng.choice([b"\n", b"Failures:", b"[PG ", b"NCCL WARN ", b"\x1b", b"\x00", b"timeout"])
        elif kind == 1:
            del out[at : at + rng.randrange(1, 30)]
        else:
            out[at:at] = out[max(0, at - 40) : at]
    return bytes(out)


def test_the_candidate_lines_of_generated_and_mutated_tails_are_the_python_groupings() -> None:
    rng = random.Random(20261207)
    lines = [*_training(3), *[generated_line(rng) for _ in range(40)], *SUMMARY, *_training(2)]
    base = "\n".join(lines).encode()
    candidates = 0
    for _ in range(600):
        data = _mutated(rng, base)
        if rng.random() < 0.5:
            data = data[rng.randrange(len(data)) :]  # any start, the last line without its newline
        candidates += len(_check(data))
    assert candidates > 600 * 10  # most tails hold many candidate lines


def test_every_word_alone_and_side_by_side_on_a_line() -> None:
    words = [*MARKERS, *STRUCTURAL, *REREAD]
    for i, word in enumerate(words):
        _check(f"before\n{word}\n{word} and {words[i - 1]}\nafter".encode("utf-8", "replace"))
        _check(word.encode())  # a match at the very start and end of the data


def test_no_match_and_matches_given_by_hand() -> None:
    assert candidate_lines(b"", [], (3,), b"\x01", 1) == []
    data = b"abc\nxabcx\nabc"
    found = [(3, 0), (8, 0), (13, 1)]
    assert candidate_lines(data, found, (3, 3), b"\x01\x00", 1) == by_python(data, found, (3, 3), b"\x01\x00", 1)
    assert [line[:2] for line in candidate_lines(data, found, (3, 3), b"\x01\x00", 1)] == [(0, 3), (4, 9)]


@pytest.mark.parametrize(
    ("found", "lengths", "deciding", "error"),
    [
        ([(3, 5)], (3,), b"\x01", ValueError),  # an id with no word
        ([(3, 1)], (3, 3), b"\x01", ValueError),  # an id past the deciding mask
        ([(99, 0)], (3,), b"\x01", ValueError),  # a match past the data's end
        ([(8, 0)], (3,), b"\x01", ValueError),  # one byte past it
        ([(2, 0)], (3,), b"\x01", ValueError),  # a match before the data's start
        ([(3, 0, 1)], (3,), b"\x01", TypeError),  # not a pair
        ([(3, 0)], [3], b"\x01", TypeError),  # lengths not a tuple
        (((3, 0),), (3,), b"\x01", TypeError),  # found not a list
        ([(3, 0)], (3,), "\x01", TypeError),  # a mask that is no buffer
    ],
)
def test_matches_that_do_not_fit_the_data_are_refused(found, lengths, deciding, error) -> None:
    with pytest.raises(error):
        candidate_lines(b"abc\nabc", found, lengths, deciding, 1)


def test_a_call_with_other_arguments_is_refused() -> None:
    with pytest.raises(TypeError, match="5 arguments"):
        candidate_lines(b"abc", [])
