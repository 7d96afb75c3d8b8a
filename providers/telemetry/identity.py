"""Node identity: which scope node a hostname, a per-host folder or file, or an epilog file name names.

A name matches a scope node only as a whole, case-insensitively (RFC 4343). The one equivalence allowed is a short
name and its FQDN: scope node `worker-01` matches host `worker-01.cluster.local` and scope node
`worker-01.cluster.local` matches host `worker-01`, but only while the short name belongs to a single scope node;
a short name two scope nodes share matches nothing but an exact name. Never a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property


def _short(name: str) -> str:
    return name.split(".", 1)[0]


def lowered(names: Sequence[str]) -> list[str]:
    """Each name in lower case, by one pass over them all (up to 16,384 scope nodes). A node name holds no control
    character (docs/contract.md), so splitting the lowered text at its newlines gives the names back; were one to
    hold a newline, the count would tell and the names are lowered one by one."""
    if not names:
        return []
    joined = "\n".join(names)
    lower = joined.lower()
    if lower == joined:
        return list(names)  # already lower case, newlines or not
    parts = lower.split("\n")
    return parts if len(parts) == len(names) else [n.lower() for n in names]


class NodeNames:
    """Maps names found in logs and file names to the scope's nodes (findings use the scope's spelling)."""

    def __init__(self, nodes: Iterable[str], lower: list[str] | None = None) -> None:
        self.nodes = list(nodes)
        if lower is None:
            lower = lowered(self.nodes)
        self._lower = lower
        self._exact = dict(zip(lower, self.nodes, strict=True))
        if len(self._exact) == len(self.nodes) and "." not in "".join(self.nodes):
            self._short = self._exact  # no FQDN: every short name is its one node's whole name
            return
        # A short name shared by two scope nodes (`gpu-1` and `gpu-1.a`) is ambiguous: only exact names match it.
        # One pass over a scope of up to 16,384 nodes: the short name's node, or None once a second node shares it.
        by_short: dict[str, str | None] = {}
        for low, n in zip(lower, self.nodes, strict=True):
            short = low.partition(".")[0]
            if short not in by_short:
                by_short[short] = n
            elif by_short[short] not in (None, n):
                by_short[short] = None
        self._short = {s: n for s, n in by_short.items() if n is not None}

    @cached_property
    def short_names(self) -> frozenset[str]:
        """Every scope node's short name, lower case: a host that names a scope node holds one of them."""
        return frozenset(low.partition(".")[0] for low in self._lower)

    def node_for(self, name: str | None) -> str | None:
        """The scope node `name` names, or None."""
        if not name:
            return None
        key = name.lower().rstrip(".")
        exact = self._exact.get(key)
        if exact is not None:
            return exact
        node = self._short.get(_short(key))
        if node is None:
            return None
        # One side is the short name and the other its FQDN; two different FQDNs never match.
        return node if "." not in key or "." not in node else None


def scope_names(nodes: Sequence[str]) -> NodeNames:
    """NodeNames over the scope's nodes, each name once: names compare case-insensitively (RFC 4343) and the
    scope's first spelling is kept."""
    lower = lowered(nodes)
    if len(set(lower)) == len(lower):
        return NodeNames(nodes, lower)
    seen: set[str] = set()
    kept: list[str] = []
    kept_lower: list[str] = []
    for n, low in zip(nodes, lower, strict=True):
        if low not in seen:
            seen.add(low)
            kept.append(n)
            kept_lower.append(low)
    return NodeNames(kept, kept_lower)
