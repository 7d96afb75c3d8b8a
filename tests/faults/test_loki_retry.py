"""A Loki gateway that answers 429 or 503 before it answers: the query is sent again within the deadline.

A real HTTP server on 127.0.0.1 answers each query with the next status of its script (`Retry-After` as scripted)
and then with a valid body holding an Xid 79 line on worker-01. The Adapter is called through the Flask test client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.faults.conftest import URL, check_typed_error, loki_options, loki_xid_on, make_app, request_body


class ScriptedLoki:
    """Answers query N with `script[N]` (status, Retry-After or None) while it lasts, then with the Xid body."""

    def __init__(self, script: list[tuple[int, str | None]]) -> None:
        self.script = list(script)
        self.seen: list[int] = []  # the status answered to each query, in order
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                with outer.lock:
                    status, after = outer.script.pop(0) if outer.script else (200, None)
                    outer.seen.append(status)
                body = loki_xid_on("worker-01") if status == 200 else b'{"error": "too many outstanding requests"}'
                self.send_response(status)
                if after is not None:
                    self.send_header("Retry-After", after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def scripted() -> Iterator[list[ScriptedLoki]]:
    made: list[ScriptedLoki] = []
    yield made
    for loki in made:
        loki.stop()


def _ask(scripted: list[ScriptedLoki], script: list[tuple[int, str | None]], timeout_ms: int) -> tuple[dict, list]:
    loki = ScriptedLoki(script)
    scripted.append(loki)
    client = make_app(loki_options(loki.url)).test_client()
    response = client.post(URL, json=request_body(timeout_ms=timeout_ms))
    assert response.status_code == 200
    return response.get_json(), loki.seen


@pytest.mark.parametrize("status", [429, 503])
def test_a_query_refused_with_retry_after_is_sent_again_and_answered(scripted, status: int) -> None:
    data, seen = _ask(scripted, [(status, "1")], timeout_ms=5000)
    assert seen == [status, 200]
    assert [f["target"] for f in data["attributions"]] == [{"type": "Node", "name": "worker-01"}]


def test_without_retry_after_the_query_is_sent_again_after_a_short_backoff(scripted) -> None:
    data, seen = _ask(scripted, [(503, None), (429, None)], timeout_ms=5000)
    assert seen == [503, 429, 200]
    assert [f["target"] for f in data["attributions"]] == [{"type": "Node", "name": "worker-01"}]


def test_a_wait_past_the_deadline_is_not_slept_and_says_why(scripted) -> None:
    # Retry-After 30 s with a 2 s deadline: the query fails at once, with the gateway's status and its wait.
    data, seen = _ask(scripted, [(429, "30")], timeout_ms=2000)
    assert seen == [429]
    assert data["error"]["type"] == "service_error"
    assert data["attributions"] == []
    assert "answered HTTP 429 and asked to retry after 30 s, past the deadline" in data["error"]["message"]


def test_a_retry_after_of_thousands_of_digits_is_a_wait_past_the_deadline(scripted) -> None:
    # More digits than `int` reads from text (4,300): urllib3's reading of the header raised, and the request failed
    # without saying why. It is a wait no deadline allows, said as the others are.
    data, seen = _ask(scripted, [(429, "7" * 5000)], timeout_ms=2000)
    assert seen == [429]
    assert data["error"]["type"] == "service_error"
    assert ("answered HTTP 429 and asked to retry after a wait of thousands of digits, past the deadline"
            in data["error"]["message"])


def test_retries_are_bounded_and_the_last_refusal_is_the_error(scripted) -> None:
    loki = ScriptedLoki([(429, "0")] * 10)
    scripted.append(loki)
    client = make_app(loki_options(loki.url)).test_client()
    data = check_typed_error(client.post(URL, json=request_body(timeout_ms=5000)), "service_error")
    assert loki.seen == [429] * 4  # the query and 3 retries
    assert data["error"]["message"] == "the Loki log source answered HTTP 429"
