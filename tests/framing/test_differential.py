"""The worker's framing against two strict references: every case of the corpus (tests/framing/corpus.py) is sent as
raw bytes to a real gunicorn on 127.0.0.1 running the Adapter's worker class (in front of an app that echoes what
it was handed), to h11, and to Node.js's own HTTP server (llhttp) where `node` is installed.

The worker must never read a request where the reference refuses, nor read one the reference reads otherwise
(another method, target or body). It may refuse more than a reference: every such case is listed in STRICTER,
with the reason, and a case that becomes stricter or stops being so fails the table's test until it is listed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.framing.corpus import CASES
from tests.framing.readings import Reading, compare, h11_reading, worker_reading
from tests.gunicorn_process import Gunicorn

NODE_SCRIPT = Path(__file__).with_name("llhttp_reference.mjs")
NODE_TIMEOUT_S = 120.0

# Where the worker refuses (or stops) before a reference has read every request the reference reads, and why.
# Against h11: what llhttp refuses and h11 reads (h11 is lenient about line ends, folds and control characters),
# and the worker's own rules.
_LLHTTP_REFUSES = "llhttp refuses it (strict mode); h11 reads it"
STRICTER_THAN_H11 = {
    "trailer_bare_lf_swallows_request": _LLHTTP_REFUSES + ": a bare LF ends a trailer line",
    "cl_te": _LLHTTP_REFUSES + ": Content-Length beside Transfer-Encoding (h11 takes the chunked body)",
    "te_cl": _LLHTTP_REFUSES + ": Transfer-Encoding beside Content-Length",
    "cl_te_zero_length": _LLHTTP_REFUSES + ": Content-Length 0 beside Transfer-Encoding",
    "te_after_bare_lf_header": _LLHTTP_REFUSES + ": a header line ended by a bare LF",
    "te_obs_folded": _LLHTTP_REFUSES + ": an obs-folded Transfer-Encoding value",
    "te_in_http10": "Transfer-Encoding in HTTP/1.0 is faulty framing (RFC 9112 section 6.1)",
    "cl_twice_same": _LLHTTP_REFUSES + ": a second Content-Length, even of the same value",
    "cl_list_same": _LLHTTP_REFUSES + ": a Content-Length list",
    "chunk_size_trailing_space": _LLHTTP_REFUSES + ": a space after the chunk size",
    "chunk_extension_bare_cr": _LLHTTP_REFUSES + ": a bare CR in a chunk extension",
    "chunk_extension_control_char": _LLHTTP_REFUSES + ": a control character in a chunk extension",
    "trailer_obs_fold": _LLHTTP_REFUSES + ": an obs-folded trailer line",
    "last_chunk_bare_lf_end": _LLHTTP_REFUSES + ": a bare LF ends the trailer section",
    "obs_fold_in_field": _LLHTTP_REFUSES + ": obs-fold (RFC 9112 section 5.2 lets a server refuse it)",
    "bare_lf_line_ends": _LLHTTP_REFUSES + ": bare LF line ends",
    "bare_lf_head_end": _LLHTTP_REFUSES + ": a head ended by a bare LF",
    "control_char_in_field_value": _LLHTTP_REFUSES + ": a control character in a header value",
    "del_in_field_value": _LLHTTP_REFUSES + ": DEL in a header value",
    "http2_preface": "the HTTP/2 preface is not an HTTP/1.x request (h11 reads PRI, then refuses)",
    "http20_request_line": "only HTTP/1.0 and HTTP/1.1 are served",
    "http12": _LLHTTP_REFUSES + ": HTTP/1.2",
    "lower_case_method": "a method outside the ones the app takes: 405 or 404",
    "unknown_method": "a method outside the ones the app takes: 405 or 404",
    "connect_method": "a method outside the ones the app takes: 405 or 404",
    "authority_form_get": _LLHTTP_REFUSES + ": an authority-form target outside CONNECT",
    "target_without_slash": _LLHTTP_REFUSES + ": a target that is neither origin, absolute nor asterisk form",
    "expect_unknown": "an expectation other than 100-continue is answered 417 (RFC 9110 section 10.1.1)",
    "upgrade_then_request": "an upgrade request is served, the switch declined, and the connection closed after it",
}
# Against Node.js: what h11 refuses and llhttp reads, and the worker's own rules.
_H11_REFUSES = "h11 refuses it; Node.js's llhttp reads it"
STRICTER_THAN_LLHTTP = {
    "http11_two_hosts": "two Host fields (RFC 9112 section 3.2: answered 400); " + _H11_REFUSES,
    "te_identity_then_chunked": "a coding other than chunked is not supported; " + _H11_REFUSES,
    "te_gzip_then_chunked": "a coding other than chunked is not supported; " + _H11_REFUSES,
    "te_in_http10": "Transfer-Encoding in HTTP/1.0 is faulty framing (RFC 9112 section 6.1)",
    "http09": "HTTP/0.9 is not served; " + _H11_REFUSES,
    "http10_keep_alive_pipelined": "the connection closes after an HTTP/1.0 request, as h11 does",
    "http20_request_line": "only HTTP/1.0 and HTTP/1.1 are served",
    "double_space_request_line": "two spaces in the request line (RFC 9112 section 3); " + _H11_REFUSES,
    "leading_crlf": "an empty line before the request line; " + _H11_REFUSES,
}
STRICTER = {"h11": STRICTER_THAN_H11, "llhttp": STRICTER_THAN_LLHTTP}


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    env = {"ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_THREADS": "4", "ATTRIBUTION_LOG_LEVEL": "error"}
    server = Gunicorn(env, tmp_path_factory.mktemp("framing") / "gunicorn.log", app="tests.framing.echo_app:app")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def worker_readings(echo_server: Gunicorn) -> dict[str, Reading]:
    return {name: worker_reading(echo_server.port, raw) for name, raw in CASES.items()}


@pytest.fixture(scope="module")
def llhttp_readings() -> dict[str, Reading]:
    node = shutil.which("node")
    if node is None:
        # CI installs Node.js (.ci/run); elsewhere the h11 reference still runs.
        (pytest.fail if os.environ.get("CI") else pytest.skip)("node is not installed: the llhttp reference needs it")
    cases = [{"name": name, "raw": base64.b64encode(raw).decode()} for name, raw in CASES.items()]
    done = subprocess.run(
        [node, str(NODE_SCRIPT)], input=json.dumps(cases), capture_output=True, text=True, timeout=NODE_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    return {
        name: Reading(tuple(map(tuple, read[name]["requests"])), "refused" if read[name]["refused"] else "end")
        for name in CASES
    }


@pytest.fixture(scope="module")
def h11_readings() -> dict[str, Reading]:
    return {name: h11_reading(raw) for name, raw in CASES.items()}


def reference_readings(request: pytest.FixtureRequest, reference: str) -> dict[str, Reading]:
    return request.getfixturevalue(f"{reference}_readings")


@pytest.mark.parametrize("reference", ["h11", "llhttp"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_worker_reads_no_request_the_reference_does_not(request, worker_readings, reference, case):
    worker, expected = worker_readings[case], reference_readings(request, reference)[case]
    assert compare(worker, expected) != "DISAGREE", (
        f"{case}: worker {worker.describe()}, {reference} {expected.describe()}"
    )


@pytest.mark.parametrize("reference", ["h11", "llhttp"])
def test_every_case_where_the_worker_refuses_more_is_listed(request, worker_readings, reference):
    readings = reference_readings(request, reference)
    stricter = {
        name: f"worker {worker_readings[name].describe()}, {reference} {readings[name].describe()}"
        for name in CASES
        if compare(worker_readings[name], readings[name]) == "stricter"
    }
    assert sorted(stricter) == sorted(STRICTER[reference]), stricter


def test_the_corpus_reaches_both_sides_of_the_line(worker_readings, h11_readings):
    """The corpus holds cases the worker reads whole, and cases both it and h11 refuse: it tests a line, not one
    side of it."""
    read = [name for name, reading in worker_readings.items() if reading.stop == "end" and reading.requests]
    refused = [name for name in CASES if worker_readings[name].stop == h11_readings[name].stop == "refused"]
    assert len(read) >= 20 and len(refused) >= 20, (read, refused)
