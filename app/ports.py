"""Can this process listen on an address? Checked before gunicorn binds, so a port in use is one clear line."""

from __future__ import annotations

import socket


def bind_problem(address: str) -> str | None:
    """None when `HOST:PORT` can be bound now, else why not (e.g. "address already in use").

    Binds and closes a socket with SO_REUSEADDR, as gunicorn and the metrics server bind theirs, so a port that only
    has connections in TIME_WAIT counts as free.
    """
    host, _, port = address.rpartition(":")
    try:
        infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
    except (OSError, ValueError) as exc:
        return f"cannot resolve: {exc}"
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            return (exc.strerror or str(exc)).lower()
    return None
