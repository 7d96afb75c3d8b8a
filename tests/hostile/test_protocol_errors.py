"""Requests that break HTTP/1.1 framing get a 4xx JSON answer from the Adapter, never a 500, and the connection
closes."""

from __future__ import annotations

import socket
import time

import pytest

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


def test_a_control_character_in_a_header_value_is_a_400(server):
    answer = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Odd: a\x01b\r\n\r\n")
    assert_json_refusal(answer, 400)


@pytest.mark.parametrize(
    "coding", [b" \x0bchunked", b" \x0cchunked", b" chunked\x0b", b" \rchunked", b"\nchunked"], ids=repr
)
def test_a_transfer_encoding_padded_with_control_characters_is_one_400_and_nothing_after_it(server, coding):
    """The smuggling the issue list found: read as chunked, this body ended after `0` and the GET behind it was
    answered as a second request (405, then 404)."""
    raw = (
        b"POST /healthz HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:" + coding + b"\r\n\r\n0\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"
    )
    with connect(server.port) as sock:
        sock.sendall(raw)
        answer = read_answer(sock)
        assert_json_refusal(answer, 400)
        assert sock.recv(1) == b""  # no second answer


@pytest.mark.parametrize(
    "body",
    [
        b"2;\nxx\r\n{}\r\n0\r\n\r\n",  # a bare LF inside a chunk extension
        b"0\r\nX-T: 1\n\n",  # a trailer line ended by a bare LF
        b"0\r\nX-T: 1\r\n folded\r\n\r\n",  # an obs-folded trailer
    ],
    ids=["extension-bare-lf", "trailer-bare-lf", "trailer-fold"],
)
def test_a_chunked_body_with_a_bare_lf_or_a_fold_is_one_400_and_nothing_after_it(server, body):
    raw = _post("Transfer-Encoding: chunked\r\n", body + b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
    with connect(server.port) as sock:
        sock.sendall(raw)
        assert_json_refusal(read_answer(sock), 400)
        assert sock.recv(1) == b""


def test_an_http11_request_without_host_is_a_400(server):
    assert_json_refusal(exchange(server.port, b"GET /healthz HTTP/1.1\r\n\r\n"), 400)
    # HTTP/1.0 has no Host requirement.
    answer = exchange(server.port, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert answer.status == 200 and answer.closed


def test_an_expectation_other_than_100_continue_is_a_417(server):
    assert_json_refusal(exchange(server.port, _post("Expect: coffee\r\nContent-Length: 2\r\n", b"{}")), 417)


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_100_continue_is_sent_to_an_http11_client_only(server, version):
    """RFC 9110 section 10.1.1: a 100-continue expectation of an HTTP/1.0 request is ignored."""
    import json

    body = json.dumps(SEED_EXAMPLE).encode()
    head = (
        f"POST /v1/attribution {version}\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with connect(server.port) as sock:
        sock.sendall(head)
        if version == "HTTP/1.1":
            assert sock.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"  # the client waits for it
        else:
            time.sleep(0.5)  # what the server sends by now is read below, before the final answer
        sock.sendall(body)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
    assert received.split(b"\r\n", 1)[0] in (b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK"), received[:100]


def test_pipelined_requests_after_an_http10_request_are_not_read(server):
    """After an HTTP/1.0 request the connection closes, whatever the request asks (see tests/framing)."""
    with connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_answer(sock)
        assert answer.status == 200 and answer.closed


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


def test_an_endless_trailer_field_is_refused_once_it_passes_the_bound(server):
    """A trailer value never ended: refused after about 9 KiB, not held while it grows."""
    with connect(server.port) as sock:
        sock.sendall(_post("Transfer-Encoding: chunked\r\n", b"2\r\n{}\r\n0\r\nX-T: "))
        for _ in range(4):  # 16 KiB of one value, then silence: the answer must not wait for more
            sock.sendall(b"v" * 4096)
        assert_json_refusal(read_answer(sock), 400)


def test_pipelined_requests_sent_a_few_bytes_at_a_time_are_each_read_whole(server):
    """Wherever the reads split them (a head's end across two reads, a body, the next request line), two pipelined
    requests are two answers."""
    import json

    body = json.dumps(SEED_EXAMPLE).encode()
    raw = _post(f"Content-Length: {len(body)}\r\n", body) + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(server.port) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, len(raw), 7):
            sock.sendall(raw[start : start + 7])
            time.sleep(0.001)
        first, second = read_answer(sock), read_answer(sock)
    assert first.status == 200 and first.json()["attributions"], first.body
    assert second.status == 200 and second.json() == {"status": "ok"}
