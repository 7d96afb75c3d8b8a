"""A stub Loki for the benchmarks: `GET /loki/api/v1/query_range` on 127.0.0.1, each answer after a fixed delay.

Every query gets a plausible answer: no lines, or for one host in `xid_hosts` (when the query names it) one Xid 79
line. It records each request's URL length and the most requests it held at once. Stdlib only.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class StubLoki:
    """`with StubLoki(delay_s=0.05) as loki:` serves on `loki.url` until the block ends (stopped, thread joined)."""

    def __init__(self, delay_s: float = 0.05, xid_hosts: tuple[str, ...] = (), at_ns: int = 0) -> None:
        self.delay_s = delay_s
        self.xid_hosts = xid_hosts
        self.at_ns = at_ns
        self.url_lengths: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlparse(self.path)
                if url.path != "/loki/api/v1/query_range":
                    self.send_error(404)
                    return
                with stub.lock:
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                    stub.url_lengths.append(len(self.path) + len(stub.url))
                try:
                    time.sleep(stub.delay_s)
                    query = parse_qs(url.query)["query"][0]
                    # The benchmark's names need no string escaping beyond the regex's own backslashes.
                    pattern = re.compile(query[query.index('=~"') + 3 : query.rindex('"')].replace("\\\\", "\\"))
                    line = "NVRM: Xid (PCI:0000:91:00): 79, pid=1, GPU has fallen off the bus."
                    result = [
                        {"stream": {"host": host}, "values": [[str(stub.at_ns), line]]}
                        for host in stub.xid_hosts
                        if pattern.fullmatch(host)
                    ]
                    body = json.dumps(
                        {"status": "success", "data": {"resultType": "streams", "result": result, "stats": {}}}
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> StubLoki:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        with self.lock:
            self.url_lengths.clear()
            self.most_in_flight = 0
