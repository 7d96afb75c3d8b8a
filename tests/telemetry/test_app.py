"""The telemetry provider behind the Flask app, as a caller talks to it."""

from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider
from tests.telemetry.conftest import fast_body


@pytest.mark.parametrize("detected_at", ["0001-01-01T00:00:00Z", "0001-01-01T00:05:00Z", "9999-12-31T23:59:59Z"])
def test_a_failure_time_at_the_ends_of_the_calendar_is_answered_not_failed(tmp_path: Path, detected_at: str) -> None:
    (tmp_path / "logs").mkdir()
    provider = TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path / "logs")}
    )
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    answer = client.post("/v1/attribution", json=fast_body(["worker-01"], detected_at))
    assert answer.status_code == 200
    data = answer.get_json()
    # The window is clipped to the calendar: nothing was logged then, which is not a service error.
    assert data["error"]["type"] == "insufficient_telemetry"
    assert data["attributions"] == [] and data["unattributed_targets"] == []


def test_sessions_continue_between_this_release_and_one_that_called_the_provider_kernel_log() -> None:
    """A replica of the release before the rename built its session codec with the registry name `kernel_log`; ids
    it issued continue here, and ids issued here continue there (a rolling upgrade, both directions)."""
    from app.cli import sample_settings
    from app.mapping import to_request
    from app.sessions import SessionCodec
    from app.settings import SESSION_TTL
    from schemas.request import AttributionRequestSchema

    options = sample_settings()
    client = create_app(Settings(provider="telemetry", options=options)).test_client()
    before_rename = SessionCodec("kernel_log", int(SESSION_TTL.default))  # type: ignore[arg-type]
    fast = fast_body(["worker-01", "worker-03"], "2026-09-09T12:00:00Z")
    window = {"start_time": "2026-09-09T12:05:00Z", "end_time": "2026-09-09T12:20:00Z"}

    def slow(session_id: str) -> dict:
        body = {**fast, "phase": "slow", "continue_session": session_id, "scope": {**fast["scope"], **window}}
        return body

    issued_before = before_rename.issue(to_request(AttributionRequestSchema().load(fast)), {"v": 1})
    served = client.post("/v1/attribution", json=slow(issued_before)).get_json()
    assert "error" not in served and served["attribution_session_id"] == issued_before
    assert [(f["target"]["name"], f["error_category"]) for f in served["attributions"]] == [("worker-01", "gpu_memory")]

    issued_here = client.post("/v1/attribution", json=fast).get_json()["attribution_session_id"]
    slow_request = to_request(AttributionRequestSchema().load(slow(issued_here)))
    assert before_rename.open(issued_here, slow_request) == {"v": 1}
