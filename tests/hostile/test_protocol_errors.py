"""Requests that break HTTP/1.1 framing get a 4xx JSON answer from the Adapter, never a 500, and the connection
closes."""

from __future__ import annotations

import socket

from app.openapi import SEED_EXAMPLE
from tests.hostile.conftest import assert_json_refusal, connect, exchange, read_answer


def _post(headers: str, body: bytes = b"") -> bytes:
    return (
        f"POST /v1/attribution HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{headers}\r\n"
    ).encode() + body


def test_a_malformed_chunked_body_is_a_400(server):
    answer = exchange(server.port, _post("Transfer-Encoding: chunked\r\n", b"zz\r\n{}\r\n0\r\n\r\n"))
    assert_json_refusal(answer, 400)


def test_a_chunk_without_its_crlf_is_a_400(server):
    answer = exchange(server.port, _post("Transfer-Encoding: chunked\r\n", b"2\r\n{}XX0\r\n\r\n"))
    assert_json_refusal(answer, 400)


def test_a_well_formed_chunked_body_still_reaches_the_app(server):
    import json

    body = json.dumps(SEED_EXAMPLE).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:]))
    answer = exchange(server.port, _post("Transfer-Encoding: chunked\r\nConnection: close\r\n", chunks + b"0\r\n\r\n"))
    assert answer.status == 200, answer.body
    assert answer.json()["attributions"]


def test_content_length_with_transfer_encoding_is_a_400(server):
    raw = _post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n")
    assert_json_refusal(exchange(server.port, raw), 400)


def test_a_bad_request_line_is_a_400(server):
    assert_json_refusal(exchange(server.port, b"this is not http\r\n\r\n"), 400)


def test_an_unknown_http_version_is_a_400(server):
    assert_json_refusal(exchange(server.port, b"GET /healthz HTTP/7.3\r\nHost: x\r\n\r\n"), 400)


def test_an_oversized_header_is_a_431(server):
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"
    assert_json_refusal(exchange(server.port, raw), 431)


def test_too_many_headers_is_a_431(server):
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n"
    assert_json_refusal(exchange(server.port, raw), 431)


def test_an_oversized_request_line_is_a_414(server):
    raw = b"GET /healthz?" + b"q" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_json_refusal(exchange(server.port, raw), 414)


def test_an_invalid_header_name_is_a_400(server):
    assert_json_refusal(exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n"), 400)


def test_an_unknown_method_is_a_405_with_allow_on_a_served_path_and_a_404_elsewhere(server):
    for path in ("/healthz", "/v1/attribution"):
        # The app's own answer to a method it knows but the path does not take.
        known = exchange(server.port, f"PUT {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert known.status == 405
        answer = exchange(server.port, f"BREW {path}?x=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert_json_refusal(answer, 405)
        assert answer.json() == known.json() == {"detail": "Method Not Allowed"}
        assert sorted(answer.headers["allow"].split(", ")) == sorted(known.headers["allow"].split(", "))
    answer = exchange(server.port, b"BREW /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_json_refusal(answer, 404)
    assert answer.json() == {"detail": "Not Found: no such path"}


def test_an_over_limit_content_length_is_answered_before_any_body_is_sent(server):
    with connect(server.port) as sock:
        sock.sendall(_post("Content-Length: 1000000000\r\n"))
        # Not a byte of the body is sent: the answer can only come from the declared length.
        answer = read_answer(sock)
    assert_json_refusal(answer, 413)
    assert answer.json()["detail"] == "Request body is larger than the configured limit"


def test_an_over_limit_chunked_body_is_refused_once_it_passes_the_limit(server):
    with connect(server.port) as sock:
        sock.sendall(_post("Transfer-Encoding: chunked\r\n"))
        chunk = b"a" * 32768
        for _ in range(3):  # 96 KiB against a 64 KiB limit, then silence: the answer must not wait for more
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = read_answer(sock)
    assert_json_refusal(answer, 413)


def test_keep_alive_still_serves_several_requests_on_one_connection(server):
    with connect(server.port) as sock:
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_answer(sock)
            assert answer.status == 200 and answer.json() == {"status": "ok"}
        # Two pipelined requests in one write are both answered.
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).status == 200
        assert read_answer(sock).status == 200
        sock.shutdown(socket.SHUT_WR)


def test_what_gunicorns_parser_still_refuses_is_json_too(server):
    # The worker lets this head through (names and framing are fine); gunicorn's parser refuses the control
    # character in the value, and the worker's error handler answers it.
    answer = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Odd: a\x01b\r\n\r\n")
    assert_json_refusal(answer, 400)


def test_a_body_the_app_leaves_unread_never_becomes_the_next_request(server):
    """The worker hands the app the whole body; what the app does not read is dropped with it, never parsed as
    the start of the next request on the connection (here the body even looks like one)."""
    import json

    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    valid = json.dumps(SEED_EXAMPLE).encode()
    refused = f"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: {len(smuggled)}\r\n\r\n".encode() + smuggled
    served = _post(f"Content-Length: {len(valid)}\r\n", valid)
    with connect(server.port) as sock:
        sock.sendall(refused)
        assert read_answer(sock).status == 405
        sock.sendall(served)
        answer = read_answer(sock)
        assert answer.status == 200 and answer.json()["attributions"], answer.body
        # The same two pipelined in one write: two answers, then nothing more.
        sock.sendall(refused + served)
        assert read_answer(sock).status == 405
        assert read_answer(sock).status == 200
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(5)
        assert sock.recv(1) == b""


def test_a_body_sent_in_many_pieces_reaches_the_app_whole(server):
    """A body near the limit, written in small pieces: every node the caller sent comes back in the answer."""
    import json
    import time

    nodes = [f"node-{i:04d}-" + "p" * 40 for i in range(1200)]
    body = json.dumps({**SEED_EXAMPLE, "scope": {**SEED_EXAMPLE["scope"], "nodes": nodes}}).encode()
    assert 48 * 1024 < len(body) <= 64 * 1024
    with connect(server.port) as sock:
        sock.sendall(_post(f"Content-Length: {len(body)}\r\n"))
        for start in range(0, len(body), 7000):
            sock.sendall(body[start : start + 7000])
            time.sleep(0.01)
        answer = read_answer(sock)
    assert answer.status == 200, answer.body
    data = answer.json()
    named = {a["target"]["name"] for a in data["attributions"]} | {t["name"] for t in data["unattributed_targets"]}
    assert named == set(nodes)
