"""Node identity: which scope node a hostname, a per-host folder or file, or an epilog file name names.

A name matches a scope node only as a whole, case-insensitively (RFC 4343). The one equivalence allowed is a short
name and its FQDN: scope node `worker-01` matches host `worker-01.cluster.local` and scope node
`worker-01.cluster.local` matches host `worker-01`, but only while the short name belongs to a single scope node;
a short name two scope nodes share matches nothing but an exact name. Never a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable


def _short(name: str) -> str:
    return name.split(".", 1)[0]


class NodeNames:
    """Maps names found in logs and file names to the scope's nodes (findings use the scope's spelling)."""

    def __init__(self, nodes: Iterable[str]) -> None:
        self.nodes = list(nodes)
        self._exact = {n.lower(): n for n in self.nodes}
        by_short: dict[str, set[str]] = {}
        for n in self.nodes:
            by_short.setdefault(_short(n.lower()), set()).add(n)
        # A short name shared by two scope nodes (`gpu-1` and `gpu-1.a`) is ambiguous: only exact names match it.
        self._short = {s: next(iter(ns)) for s, ns in by_short.items() if len(ns) == 1}

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
