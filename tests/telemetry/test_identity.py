"""Node identity over whole scopes: the bulk passes give the same names as one name at a time."""

from __future__ import annotations

import pytest

from providers.telemetry.identity import NodeNames, lowered, scope_names


@pytest.mark.parametrize(
    "names",
    [[], ["Worker-01"], ["A\nB", "C"], ["a\nb", "c"], ["x", "\n", "ÀÉ", "İ"], [f"GPU-{i}" for i in range(2000)]],
)
def test_lowered_is_each_name_lowered(names):
    assert lowered(names) == [n.lower() for n in names]


@pytest.mark.parametrize(
    "scope, host, node",
    [
        (["worker-01", "worker-02"], "WORKER-01", "worker-01"),
        (["worker-01", "worker-02"], "worker-01.cluster.local", "worker-01"),
        (["worker-01", "worker-02"], "worker-010", None),
        (["worker-01.cluster.local"], "worker-01", "worker-01.cluster.local"),
        (["worker-01.a", "worker-01.b"], "worker-01", None),
        (["worker-01.a", "worker-01.b"], "worker-01.b", "worker-01.b"),
        (["gpu-1", "gpu-1.a"], "gpu-1.b", None),
        (["Gpu-1", "gpu-1"], "gpu-1.x", None),
        ([f"n{i}" for i in range(5000)], "N4999.Site", "n4999"),
    ],
)
def test_a_host_names_its_scope_node_whole_or_by_short_name_and_fqdn(scope, host, node):
    assert NodeNames(scope).node_for(host) == node


@pytest.mark.parametrize(
    "scope, kept",
    [
        (["worker-01", "worker-02"], ["worker-01", "worker-02"]),
        (["Worker-01", "worker-02", "WORKER-01"], ["Worker-01", "worker-02"]),
        ([], []),
    ],
)
def test_scope_names_keep_each_node_once_in_its_first_spelling(scope, kept):
    names = scope_names(scope)
    assert names.nodes == kept
    assert all(names.node_for(n) == n for n in kept)
