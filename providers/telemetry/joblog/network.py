"""NCCL's network warnings in a job-log line: what failed, the host that reported it, the peer and the status.

NCCL writes `<host>:<pid>:<tid> [<cuda dev>] NCCL WARN <message>`; the message is also quoted inside the exceptions
PyTorch raises from it. The message shapes (InfiniBand work completions with an error status, asynchronous port
events, sockets closed by their peer, failed connects, failed verbs calls) and the public reports they come from
are listed in `docs/job-logs.md`; the patterns are in `patterns.py`.
"""

from __future__ import annotations

from providers.telemetry.joblog.patterns import IB_COMPLETION, IB_COMPLETION_OLD, NCCL_ORIGIN, PEER_AFTER, VERBS_CALL
from providers.telemetry.joblog.records import NetworkKind

#: (the host of NCCL's prefix or None, what failed, the peer as NCCL names it or None, the status or None)
NetworkWarning = tuple[str | None, NetworkKind, str | None, int | None]


def nccl_warning(body: str) -> NetworkWarning | None:
    """The network failure a line reports: after NCCL's `NCCL WARN ` when the line has it, or as quoted in an
    exception; None when it reports none."""
    pos = body.find("NCCL WARN ")
    head, message = (body[:pos], body[pos + len("NCCL WARN ") :]) if pos >= 0 else ("", body)
    host = None
    for token in head.split():
        m = NCCL_ORIGIN.fullmatch(token)
        if m:
            host = m.group("host")
            break
    found = _message(message)
    return None if found is None else (host, *found)


def is_address(name: str) -> bool:
    """An IPv4 or IPv6 address (NCCL names IB peers by address): it names no host."""
    return all(c.isdigit() or c == "." for c in name) or ":" in name


def _message(message: str) -> tuple[NetworkKind, str | None, int | None] | None:
    pos = message.find("Got completion from peer")
    if pos >= 0:
        start = message.rfind("NET/IB", 0, pos)
        m = IB_COMPLETION.match(message, start) if start >= 0 else None
        if m:
            return NetworkKind.IB_COMPLETION, m.group("peer"), int(m.group("status"))
    pos = message.find("Got completion with error ")
    if pos >= 0:
        m = IB_COMPLETION_OLD.match(message, pos)
        if m:
            return NetworkKind.IB_COMPLETION, None, int(m.group("status"))
    if "Got async event : port error" in message or "Got async event : local catastrophic error" in message:
        return NetworkKind.ASYNC_EVENT, None, None
    for needle in ("Connection closed by remote peer", "Connection closed by peer", "Connection reset by peer",
                   "failed : Broken pipe"):
        pos = message.find(needle)
        if pos >= 0:
            peer = None
            if needle.startswith("Connection closed"):
                m = PEER_AFTER.match(message, pos + len(needle))
                peer = m.group("peer") if m else None
            else:
                start = message.find("Call to recv from ")
                if 0 <= start < pos:
                    m = PEER_AFTER.match(message, start + len("Call to recv from"))
                    peer = m.group("peer") if m else None
            return NetworkKind.PEER_CLOSED, peer, None
    pos = message.find("Connect to ")
    if pos < 0:
        pos = message.find(": connect to ")  # NCCL 2.30: `<function>: connect to <peer> failed : <error>`
        pos = pos + 2 if pos >= 0 else -1
    if pos >= 0 and ("failed" in message or "returned" in message):
        m = PEER_AFTER.match(message, pos + len("Connect to"))
        return NetworkKind.CONNECT, m.group("peer") if m else None, None
    pos = message.find("Call to ibv_")
    if pos >= 0 and VERBS_CALL.match(message, pos):
        return NetworkKind.VERBS_CALL, None, None
    if "transport retry counter exceeded" in message:
        return NetworkKind.IB_COMPLETION, None, 12
    return None
