"""The kernel_log provider behind the Flask app, as a caller talks to it."""

from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.kernel_log import KernelLogProvider
from tests.kernel_log.conftest import fast_body


@pytest.mark.parametrize("detected_at", ["0001-01-01T00:00:00Z", "0001-01-01T00:05:00Z", "9999-12-31T23:59:59Z"])
def test_a_failure_time_at_the_ends_of_the_calendar_is_answered_not_failed(tmp_path: Path, detected_at: str) -> None:
    (tmp_path / "logs").mkdir()
    provider = KernelLogProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")}
    )
    client = create_app(Settings(provider="kernel_log"), provider).test_client()
    answer = client.post("/v1/attribution", json=fast_body(["worker-01"], detected_at))
    assert answer.status_code == 200
    data = answer.get_json()
    # The window is clipped to the calendar: nothing was logged then, which is not a service error.
    assert data["error"]["type"] == "insufficient_telemetry"
    assert data["attributions"] == [] and data["unattributed_targets"] == []
