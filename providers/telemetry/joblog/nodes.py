"""Node identity for job logs: which scope node a file name or a logged hostname names, and safe path components."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

#: a name from a job log (a file's stem, torchelastic's `host`, an NCCL peer) -> the scope node it names, or None
NodeResolver = Callable[[str], str | None]
#: builds a resolver for one request's scope nodes; the provider may pass its own (for example one that also
#: equates a short name with its FQDN) so that job logs and kernel logs decide node identity the same way
ResolverFactory = Callable[[Sequence[str]], NodeResolver]

#: bytes of one path component on Linux file systems (NAME_MAX)
MAX_COMPONENT_BYTES = 255
#: a control character (C0 or DEL)
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def exact_resolver(nodes: Sequence[str]) -> NodeResolver:
    """A resolver that matches a whole name, ignoring ASCII case (RFC 1035 hostnames), and nothing else.

    `worker` never names `worker-01`. Two scope nodes that differ only in case make that name ambiguous: it
    names neither (a finding on the wrong one of the two would be fabricated).
    """
    by_key: dict[str, str | None] = {}
    for node in nodes:
        key = node.lower()
        by_key[key] = None if key in by_key else node

    def resolve(name: str) -> str | None:
        return by_key.get(name.lower()) if name else None

    return resolve


def is_safe_component(name: str) -> bool:
    """True when `name` can only ever be one entry of a directory: no separator, no `.`/`..`, no control."""
    if not name or name in (".", ".."):
        return False
    if "/" in name or "\\" in name:
        return False
    if _CONTROL.search(name):
        return False
    return len(name.encode("utf-8", "surrogatepass")) <= MAX_COMPONENT_BYTES
