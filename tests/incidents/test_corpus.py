"""Every case of the incident corpus is answered through the service as its report says, or is a known miss whose
reason its case.json states; no answer ever names a node its report contradicts. SOURCES.md lists every case."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.incidents.corpus import CASES, answer, as_the_report_says, cases, contradicted, expected_findings

ALL = cases()


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_the_case_is_answered_as_its_report_says(case, tmp_path: Path) -> None:  # noqa: ANN001
    result = answer(case, tmp_path)
    assert contradicted(case, result) == []
    if case.known_miss is None:
        assert result.findings == expected_findings(case)
        assert as_the_report_says(case, result)
    else:
        # A known miss stays pinned: if the answer changes, its case.json must say so.
        assert not as_the_report_says(case, result)


def test_the_corpus_is_large_enough_and_a_third_of_it_names_a_node_and_a_third_none() -> None:
    no_node = [c for c in ALL if c.expected["target"] in ("none", "AllJobResources")]
    assert len(ALL) >= 100 and 3 * len(no_node) >= len(ALL) and 3 * (len(ALL) - len(no_node)) >= len(ALL)
    # Every case's logs come from its report and every case names its source in SOURCES.md.
    sources = (CASES.parent / "SOURCES.md").read_text()
    for case in ALL:
        assert f"`{case.id}`" in sources and case.source in sources
        assert set(case.logs) <= set(case.nodes)


def test_sources_md_states_each_case_s_expected_answer_as_its_case_json_does() -> None:
    rows = {line.split("`")[1]: line for line in (CASES.parent / "SOURCES.md").read_text().splitlines()
            if line.startswith("| `")}  # fmt: skip
    for case in ALL:
        target = case.expected["target"]
        if target == "none":
            said = "no finding"
        elif target == "AllJobResources":
            said = f"AllJobResources `{case.expected['category']}`"
        else:
            said = f"Node `{target}` `{case.expected['category']}`"
        answer = rows[case.id].rstrip(" |").rsplit("|", 1)[1].strip()
        assert answer.startswith(said) and answer.endswith("(known miss)") == (case.known_miss is not None), case.id
