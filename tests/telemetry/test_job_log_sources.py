"""The job-log settings (validated at boot) and the Loki job-log source, through the Flask test client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from app import create_app
from app.settings import Settings
from bench.loki_stub import LogStore, Stream
from providers.base import ProviderConstructionError
from providers.telemetry import TelemetryProvider
from providers.telemetry.joblog.loki import (
    build_job_query,
    header_filter,
    signal_filter,
    template_problem,
)
from tests.joblog import fixtures as fx

URL = "http://loki.test:3100"
ENDPOINT = URL + "/loki/api/v1/query_range"
DETECTED = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "logs").mkdir()
    (tmp_path / "jobs").mkdir()
    return str(tmp_path / "logs"), str(tmp_path / "jobs")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"ATTRIBUTION_JOB_LOG_DIRECTORY": "x"}, "ATTRIBUTION_JOB_LOG_DIRECTORY is not a telemetry setting"),
        ({"ATTRIBUTION_JOB_LOG_DIR": "/nonexistent/jobs"}, "ATTRIBUTION_JOB_LOG_DIR='/nonexistent/jobs' is not an"),
        ({"ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES": "4194305"}, "ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES=4194305 is out of"),
        ({"ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES": "0"}, "ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES=0 is out of range"),
        ({"ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES": "1MiB"}, "ATTRIBUTION_JOB_LOG_MAX_REQUEST_BYTES='1MiB' is not an"),
        ({"ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="x"}'}, "must contain the {workload_id} placeholder"),
        ({"ATTRIBUTION_LOKI_JOB_SELECTOR": "{job={workload_id}}"}, "whole quoted value of a label matcher"),
        ({"ATTRIBUTION_LOKI_JOB_SELECTOR": '{job=~"t-{workload_id}.*"}'}, "whole quoted value of a label matcher"),
        ({"ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="{workload_id}"}'}, "needs ATTRIBUTION_LOKI_URL"),
    ],
)
def test_job_log_settings_are_validated_at_boot(dirs: tuple[str, str], extra: dict[str, str], needle: str) -> None:
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": dirs[0], **extra}
    with pytest.raises(ProviderConstructionError) as raised:
        TelemetryProvider.from_options(options)
    assert needle in str(raised.value)


def test_both_job_log_sources_at_once_are_refused(dirs: tuple[str, str]) -> None:
    with pytest.raises(ProviderConstructionError, match="choose one job-log source"):
        TelemetryProvider.from_options({
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": dirs[0],
            "ATTRIBUTION_JOB_LOG_DIR": dirs[1], "ATTRIBUTION_LOKI_URL": URL,
            "ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="{workload_id}"}',
        })


def test_workload_ids_are_escaped_for_the_label_value_they_fill() -> None:
    assert build_job_query('{job="{workload_id}", attempt="{attempt_index}"}', 'a"b\\c\n', 2) == (
        '{job="a\\"b\\\\c\\n", attempt="2"}'
    )
    assert build_job_query('{job="{workload_id}"}', "x\x01", 0) == '{job="x\\x01"}'
    # a raw string cannot hold a backtick: that value is written in a double-quoted string instead
    assert build_job_query("{job=`{workload_id}`}", "a`b", 0) == '{job="a`b"}'
    # in a regex matcher the value matches itself only
    assert build_job_query('{job=~"{workload_id}"}', "a.*", 0) == '{job=~"a\\\\.\\\\*"}'
    assert build_job_query('{job="{workload_id}"}', "\ud800", 0) is None  # no LogQL string carries it
    assert build_job_query("{job=`{workload_id}`}", "a\\b", 0) == "{job=`a\\b`}"
    assert template_problem('{job="{workload_id}"} |= "NCCL"') is None


def _loki_body(streams: dict[str, list[tuple[datetime, str]]]) -> dict[str, Any]:
    result = [
        {"stream": {"job": "job-1", "host": host},
         "values": [[str(int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000), line] for t, line in values]}
        for host, values in streams.items()
    ]
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


def _ask(client: Any, nodes: list[str], ranks: list[int], workload: str = "job-1") -> dict[str, Any]:
    answer = client.post("/v1/attribution", json={
        "schema_version": "0.1.0", "workload_id": workload, "scope": {"nodes": nodes, "ranks": ranks},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": 10000, "workload_context": {"workflow_id": "w", "attempt_index": 0}, "phase": "fast",
    })
    assert answer.status_code == 200
    return answer.get_json()


def _client(dirs: tuple[str, str], **extra: str) -> Any:
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": dirs[0],
        "ATTRIBUTION_LOKI_URL": URL, "ATTRIBUTION_LOKI_JOB_SELECTOR": '{job="{workload_id}"}', **extra,
    })
    return create_app(Settings(provider="telemetry"), provider).test_client()


def _loki(streams: dict[str, list[tuple[datetime, str]]]) -> None:
    """Answer both Loki endpoints from `streams` (host -> timed lines), with the LogQL evaluated for real."""
    store = LogStore(
        Stream({"job": "job-1", "host": host}, [(int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000, line)
                                                for t, line in lines])
        for host, lines in streams.items()
    )

    def answer(request: Any) -> tuple[int, dict[str, str], bytes]:
        url = urlparse(request.url)
        status, body = store.answer(url.path, {k: v[0] for k, v in parse_qs(url.query).items()})
        return status, {"Content-Type": "application/json"}, body

    responses.add_callback(responses.GET, ENDPOINT, callback=answer)
    responses.add_callback(responses.GET, URL + "/loki/api/v1/query", callback=answer)


def _queries() -> list[dict[str, list[str]]]:
    return [parse_qs(urlparse(call.request.url).query) for call in responses.calls]


@responses.activate
def test_loki_job_logs_name_the_node_a_rank_is_behind_on(dirs: tuple[str, str]) -> None:
    # Assembled from two reports whose lines name process group 1, here in PyTorch 2.5's spelling with the group's
    # GUID (as LlamaFactory#8261 logs it; a per-process id alone is not the group's identity): rank 0 completed 1579
    # (LlamaFactory#7396), rank 4 completed 7752 (LlamaFactory#6269). Loki's own times stand in front of each line.
    behind = fx.LLAMAFACTORY_7396[2].split("] ", 1)[1].replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
    ahead = fx.LLAMAFACTORY_6269[3].replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
    t = DETECTED - timedelta(seconds=90)
    training = [(t - timedelta(seconds=i), f"[rank0]: step {i}") for i in range(3, 0, -1)]
    _loki({"node-a": [*training, (t, behind)], "node-b": [(t, ahead)],
           "elsewhere": [(t, fx.JADE_194_ECC[0])]})
    body = _ask(_client(dirs), ["node-a", "node-b"], [0, 4])
    assert [(f["target"], f["error_category"]) for f in body["attributions"]] == [
        ({"type": "Node", "name": "node-a"}, "collective_hang")
    ]
    finding = body["attributions"][0]
    assert f"2026-09-09T11:58:30.000000Z {behind}" in [e["message"] for e in finding["evidence"]]
    assert finding["observed_at"] == "2026-09-09T11:58:30Z"  # Loki's time became the line's collector time
    # Two queries for the one batch of nodes: the lines that hold a marker and the summary's entry headers, read
    # backward; each selects the job's streams of the scope's hosts only. Both ranks asked for are placed by their
    # own lines among those: no query asks where ranks wrote.
    sent = sorted(q["query"][0] for q in _queries())
    selector = '{job="job-1", host=~"(?i)(?:node-a|node-b)(?:\\\\..*)?"}'
    assert sent == sorted([selector + signal_filter(), selector + header_filter()])
    assert all(q["direction"] == ["backward"] for q in _queries() if "direction" in q)


@responses.activate
def test_loki_job_logs_are_read_backward_in_pages_and_bounded(dirs: tuple[str, str]) -> None:
    t = DETECTED - timedelta(seconds=60)
    newest = [(t + timedelta(seconds=i), f"[rank0]: UserWarning: step {i}") for i in range(1, 3)]
    _loki({"gpu-1": [(t, fx.JADE_194_ECC[0]), *newest]})
    body = _ask(_client(dirs, ATTRIBUTION_LOKI_LIMIT="2"), ["gpu-1"], [])
    assert [f["error_category"] for f in body["attributions"]] == ["gpu_memory"]  # found on the second page
    pages = [q for q in _queries() if q["query"][0].endswith(signal_filter())]
    assert len(pages) == 3  # the third, before the oldest line taken, holds only that line: nothing further back
    assert int(pages[1]["end"][0]) == int(t.timestamp() + 1) * 1_000_000_000 + 1  # before the first page's oldest
    # A per-node bound smaller than the newest lines leaves the older page unread and says so.
    responses.reset()
    _loki({"gpu-1": [(t, fx.JADE_194_ECC[0]), *newest]})
    body = _ask(_client(dirs, ATTRIBUTION_LOKI_LIMIT="2", ATTRIBUTION_JOB_LOG_MAX_NODE_BYTES="16"), ["gpu-1"], [])
    assert body["attributions"] == []
    assert "older job-log lines in Loki lie beyond the read bound" in body["error"]["message"]
    assert len([q for q in _queries() if q["query"][0].endswith(signal_filter())]) == 1


@responses.activate
def test_a_failing_loki_job_source_loses_no_kernel_finding_and_says_what_was_not_read(dirs: tuple[str, str]) -> None:
    # gpu-1's kernel log shows its GPU falling off the bus (Xid 79); the job-log source answers 502.
    Path(dirs[0], "gpu-1.log").write_text(
        "2026-09-09T11:59:00.000000+00:00 gpu-1 kernel: [1000.000000] NVRM: Xid (PCI:0000:91:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    )
    responses.get(ENDPOINT, status=502)
    body = _ask(_client(dirs), ["gpu-1", "gpu-2"], [])
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("gpu-1", "gpu_off_bus")]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "the job logs could not be read (the Loki job-log source answered HTTP 502)" in body["error"]["message"]
    assert all(e["source"] != "joblog" for e in body["attributions"][0]["evidence"])


@pytest.mark.parametrize("ts", [str(2**63), "10000000000000000000000", "\u00b2", "\u0661\u0662", "1" * 5000])
@responses.activate
def test_an_entry_time_that_is_not_lokis_is_an_unreadable_answer_and_loses_no_kernel_finding(
    dirs: tuple[str, str], ts: str
) -> None:
    # Loki writes an entry's time as the nanoseconds of a signed 64-bit integer in ASCII digits. An answer with
    # another made the provider fail and its kernel finding with it (past year 2262, a digit `int` refuses, more
    # digits than `int` reads) or was read as a time no Loki wrote (`١٢`: 12 ns after 1970); it is now a job-log
    # answer that cannot be read.
    Path(dirs[0], "gpu-1.log").write_text(
        "2026-09-09T11:59:00.000000+00:00 gpu-1 kernel: [1000.000000] NVRM: Xid (PCI:0000:91:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    )
    entry = {"stream": {"job": "job-1", "host": "gpu-2"},
             "values": [[ts, "[rank8]: NCCL WARN Net : Connection closed"]]}
    responses.get(ENDPOINT, json={"status": "success", "data": {"resultType": "streams", "result": [entry]}})
    body = _ask(_client(dirs), ["gpu-1", "gpu-2"], [])
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("gpu-1", "gpu_off_bus")]
    assert body["error"]["type"] == "insufficient_telemetry"
    assert "the Loki job-log source answered with an unreadable body" in body["error"]["message"]


@responses.activate
def test_a_rank_label_of_digits_int_refuses_places_no_rank(dirs: tuple[str, str]) -> None:
    # Where rank 3 (no line of its own read) wrote is asked of Loki; an answer naming it `\u00b2` (a digit to
    # `str.isdigit`, none to `int`) made the provider fail; such a series places no rank, the one beside it does.
    _loki({"gpu-1": [(DETECTED - timedelta(seconds=30), "[rank0]: step 1")]})
    series = [{"metric": {"host": "gpu-1", "attribution_rank": "\u00b2"}, "value": [0, "1"]},
              {"metric": {"host": "gpu-1", "attribution_rank": "3"}, "value": [0, "1"]}]
    responses.replace(responses.GET, URL + "/loki/api/v1/query",
                      json={"status": "success", "data": {"resultType": "vector", "result": series}})
    body = _ask(_client(dirs), ["gpu-1"], [0, 3])
    assert body["error"] == {"type": "insufficient_telemetry",
                             "message": "no kernel log lines for any of the 1 nodes in the window"}
    newest = [q["query"][0] for q in _queries() if q["query"][0].endswith(']:"')]
    assert newest == ['{job="job-1", host="gpu-1"} |= "[rank3]:"']  # rank 3's newest line asked for, nothing else


@responses.activate
def test_a_workload_id_a_raw_string_cannot_hold_is_sent_in_a_double_quoted_string(dirs: tuple[str, str]) -> None:
    _loki({})
    client = _client(dirs, ATTRIBUTION_LOKI_JOB_SELECTOR="{job=`{workload_id}`}")
    body = _ask(client, ["gpu-1"], [3], workload="a`b")
    assert body["attributions"] == []
    sent = [q["query"][0] for q in _queries()]
    assert len(sent) == 3  # the signal lines, the entry headers, where rank 3 (no line of it read) wrote
    assert all(q.startswith('{job="a`b", host=~') or q.startswith('sum by (host, attribution_rank) '
                                                                    '(count_over_time({job="a`b"} |~ ')
               for q in sent)
