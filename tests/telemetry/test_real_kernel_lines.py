"""Every real kernel line the tests hold is decoded as NVIDIA's tables say (`real_kernel_lines.py` lists them with
NVIDIA's decode of each)."""

from __future__ import annotations

from tests.telemetry.real_kernel_lines import EXPECTED, FIXTURES, REFUSED, check_all


def test_every_real_kernel_line_is_decoded_as_nvidia_decodes_it() -> None:
    checked = check_all()
    assert [c for c in checked if not c.ok] == []
    assert len([c for c in checked if c.expected != "-"]) >= 89


def test_every_real_kernel_fixture_is_checked() -> None:
    kernel_logs = {p.name for p in FIXTURES.glob("*.log")}
    assert kernel_logs == set(EXPECTED) | REFUSED
