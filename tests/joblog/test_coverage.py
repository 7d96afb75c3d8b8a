"""The coverage report counts, per catalogue, the rows the incident corpus shows, and only rows of that catalogue."""

from __future__ import annotations

from providers.telemetry.joblog.signals import BY_ID, SIGNALS
from tests.joblog.coverage import coverage


def test_every_catalogue_is_reported_with_the_rows_the_corpus_shows_of_it() -> None:
    report = coverage()
    assert sum(c.rows for c in report) == len(SIGNALS)
    assert {(c.origin, c.catalogue) for c in report} == {
        (s.origin, s.catalogue or "structural") for s in SIGNALS
    }
    for c in report:
        assert c.searched <= c.rows and len(c.shown) <= c.rows
        for row_id, cases in c.shown.items():
            row = BY_ID[row_id]
            assert (row.origin, row.catalogue or "structural") == (c.origin, c.catalogue) and cases >= 1
    shown = {row_id: cases for c in report for row_id, cases in c.shown.items()}
    # what the corpus's reports quote: an ECC error in six cases, a task's signal from srun, a port error's event
    assert shown["cudaErrorECCUncorrectable"] >= 6 and shown["srun_task_signal"] >= 1
    assert shown["IBV_EVENT_PORT_ERR"] >= 1 and shown["IBV_WC_RETRY_EXC_ERR"] >= 1
