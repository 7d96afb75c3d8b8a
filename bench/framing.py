"""What framing a request costs the worker's event loop, with each strict parser that was weighed for it.

The bytes are those the worker reads for bench/all.py's requests: the README's request as wrk sends it, the
maximal request (16,384 nodes, 262,144 ranks, just under 4 MiB) with a Content-Length, and the same sent chunked
in 64 KiB chunks; each arrives in 64 KiB reads, as the worker's recv gives them. Each is framed by

- `app.framing.Framing`, the worker's framing: llhttp through httptools, fed in pieces that end where a request
  may end, with the service's own checks of the head;
- llhttp through httptools fed whole reads, without those pieces or checks (what the pieces and checks cost);
- h11, doing the same job: events to the end of the message, the body joined, the head rebuilt for gunicorn.

    .venv/bin/python bench/framing.py [--repeat 2000]

Prints microseconds a request (median of 5 runs); no goal is asserted. Each parser hands back the body in the
pieces it read; joining them into one bytes object (for the maximal request a few milliseconds on a fresh
4 MiB allocation, more than any framing below) is the same for all and left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h11
import httptools

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.framing import Framing  # noqa: E402
from app.openapi import SEED_EXAMPLE  # noqa: E402

LIMIT = 4 * 1024 * 1024
RECV = 64 * 1024
HEAD = (
    b"POST /v1/attribution HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: wrk\r\n"
    b"Content-Type: application/json\r\nConnection: keep-alive\r\n"
)


def reads(data: bytes) -> list[bytes]:
    return [data[i : i + RECV] for i in range(0, len(data), RECV)]


def with_length(body: bytes) -> bytes:
    return HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(body: bytes) -> bytes:
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in reads(body))
    return HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


def maximal_body() -> bytes:
    nodes = [f"node-{i:05d}" for i in range(16384)]
    request = {**SEED_EXAMPLE, "scope": {"nodes": nodes, "ranks": list(range(262144))}}
    body = json.dumps(request, separators=(",", ":")).encode()
    return body + b" " * (LIMIT - 1 - len(body))


def adapter_framing(pieces: list[bytes]) -> list[bytes]:
    framing = Framing(LIMIT)
    for piece in pieces:
        framing.feed(piece)
    (message,) = framing.ready
    return message.chunks


class _Collect:
    """httptools callbacks keeping the head and the body, as the worker needs them."""

    def __init__(self) -> None:
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name, value))

    def on_body(self, data: bytes) -> None:
        self.chunks.append(data)

    def on_message_complete(self) -> None:
        self.done = True


def httptools_whole_reads(pieces: list[bytes]) -> list[bytes]:
    collect = _Collect()
    parser = httptools.HttpRequestParser(collect)
    for piece in pieces:
        parser.feed_data(piece)
    assert collect.done
    return collect.chunks


def h11_framing(pieces: list[bytes]) -> list[bytes]:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    chunks: list[bytes] = []
    head = b""
    for piece in pieces:
        conn.receive_data(piece)
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                break
            if isinstance(event, h11.Request):
                lines = [b"%s %s HTTP/%s" % (event.method, event.target, event.http_version)]
                lines += [name + b": " + value for name, value in event.headers.raw_items()]
                head = b"\r\n".join(lines)
            elif isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                assert head
                return chunks
    raise AssertionError("the message did not end")


PARSERS: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "app.framing (httptools, pieces + checks)": adapter_framing,
    "httptools, whole reads, no checks": httptools_whole_reads,
    "h11": h11_framing,
}


def measure(frame: Callable[[list[bytes]], list[bytes]], pieces: list[bytes], body: bytes, repeat: int) -> float:
    assert b"".join(frame(pieces)) == body
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            frame(pieces)
        runs.append((time.perf_counter() - start) / repeat * 1e6)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2000, help="requests framed in each run of a small request")
    args = parser.parse_args()
    readme = json.dumps(SEED_EXAMPLE).encode()
    big = maximal_body()
    cases = [
        ("README request, Content-Length", reads(with_length(readme)), readme, args.repeat),
        ("maximal request, Content-Length", reads(with_length(big)), big, max(args.repeat // 200, 5)),
        ("maximal request, chunked", reads(chunked(big)), big, max(args.repeat // 200, 5)),
    ]
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"us a request (median of 5 runs; httptools {httptools.__version__}, h11 {h11.__version__})")
    print(f"{'parser':42s} " + " ".join(f"{name:>32s}" for name, *_ in cases))
    for name, frame in PARSERS.items():
        cells = [f"{measure(frame, pieces, body, repeat):32.1f}" for _, pieces, body, repeat in cases]
        print(f"{name:42s} " + " ".join(cells))


if __name__ == "__main__":
    main()
