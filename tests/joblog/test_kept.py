"""A job-wide conclusion keeps its evidence as it goes (`work.Kept`): the same items `rules._bounded` keeps from the
whole list, on seeded streams of repeated events and repeated texts."""

from __future__ import annotations

import random

import pytest

from providers.telemetry.joblog.records import LogLine
from providers.telemetry.joblog.rules import _bounded
from providers.telemetry.joblog.work import Item, Kept, line_evidence


@pytest.mark.parametrize("seed", range(12))
def test_kept_as_it_goes_equals_bounded_over_the_whole_list(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.randint(1, 32)
    stream = [
        (("timeout", rng.randrange(4)), LogLine(f"line {rng.randrange(40)}", None, n))
        for n in range(rng.randint(0, 400))
    ]
    kept = Kept(limit)
    for key, line in stream:
        kept.add(key, line)
    assert [i.evidence for i in kept.items()] == list(_bounded([Item(k, line_evidence(ln)) for k, ln in stream], limit))
