"""A Loki answer's entries, checked and taken out in C (`loki/_entries.c` behind `client.read_entries`): the same
entries, count and refusals as the steps written in Python (`_reference`, what `read_entries` did before), for any
answer of Loki's shape and for any that is not."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.base import ProviderProcessingError, SourceFailure
from providers.telemetry.loki.client import MAX_NS, _read_streams, read_entries


def _reference(body: Any, host_label: str) -> tuple[list[tuple[str, int, str]], int] | None:
    """The entries as the Python steps read them, or None where they found the answer unreadable."""
    data = body.get("data") if isinstance(body, dict) and body.get("status") == "success" else None
    if not isinstance(data, dict) or data.get("resultType") != "streams" or not isinstance(data.get("result"), list):
        return None
    out, total = [], 0
    for stream in data["result"]:
        if not isinstance(stream, dict):
            return None
        labels, values = stream.get("stream"), stream.get("values")
        if not isinstance(labels, dict) or not isinstance(values, list):
            return None
        host = labels.get(host_label)
        for value in values:
            if not isinstance(value, list) or len(value) < 2:
                return None
            ts_text, line = value[0], value[1]
            ok = isinstance(ts_text, str) and 0 < len(ts_text) <= 19 and ts_text.isascii() and ts_text.isdigit()
            if not ok or int(ts_text) > MAX_NS or not isinstance(line, str):
                return None
            total += 1
            if isinstance(host, str):
                out.append((host, int(ts_text), line))
    out.sort(key=lambda e: e[1])
    return out, total


def _read(body: Any, host_label: str = "host") -> tuple[list[tuple[str, int, str]], int] | None:
    try:
        return read_entries(body, host_label)
    except ProviderProcessingError as exc:
        assert exc.kind is SourceFailure.MALFORMED
        assert "unreadable body" in str(exc)
        return None


def _answer(result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


_TIMES = st.one_of(
    st.integers(0, MAX_NS).map(str),
    st.integers(MAX_NS + 1, 10**19 - 1).map(str),  # 19 digits past 2**63-1
    st.sampled_from(["", "0", "0000000000000000001", "12345678901234567890", "-1", "+1", " 1", "1.5", "1e9",
                     "\u00b2", "\u0661\u0662", "１２", "9" * 19]),
    st.integers(0, 2**64),  # a number, not a str
    st.none(),
)
_LINES = st.one_of(st.text(max_size=40), st.integers(), st.none(), st.just(["a list"]))
_VALUES = st.one_of(
    st.lists(st.one_of(st.tuples(_TIMES, _LINES).map(list),
                       st.tuples(_TIMES, _LINES, st.dictionaries(st.text(max_size=3), st.text(max_size=3))).map(list)),
             max_size=6),
    st.lists(st.one_of(st.just([]), st.just(["1"]), st.just("1 line"), st.just(("1", "a tuple"))), max_size=2),
    st.just({"not": "a list"}),
)
_LABELS = st.one_of(
    st.dictionaries(st.sampled_from(["host", "job", "Host"]), st.one_of(st.text(max_size=8), st.integers(), st.none()),
                    max_size=3),
    st.just(["not", "a dict"]),
)
_STREAMS = st.lists(
    st.one_of(
        st.fixed_dictionaries({"stream": _LABELS, "values": _VALUES}),
        st.fixed_dictionaries({"values": _VALUES}),
        st.fixed_dictionaries({"stream": _LABELS}),
        st.just("not a dict"),
    ),
    max_size=5,
)


@settings(max_examples=1500, deadline=None)
@given(_STREAMS, st.sampled_from(["host", "job", "missing"]))
def test_any_answer_reads_as_the_python_steps_read_it(result: list[Any], host_label: str) -> None:
    body = _answer(result)
    assert _read(body, host_label) == _reference(body, host_label)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(st.tuples(st.integers(0, MAX_NS), st.text()),
                                                                      max_size=20)), max_size=6))
def test_answers_of_lokis_shape_give_every_entry_in_time_order(
    streams: list[tuple[str, list[tuple[int, str]]]],
) -> None:
    # through JSON, as orjson hands the answer over: one instant's entries keep the streams' order
    body = orjson.loads(orjson.dumps(_answer([
        {"stream": {"host": host, "job": "j"}, "values": [[str(ts), line] for ts, line in values]}
        for host, values in streams
    ])))
    got = _read(body)
    assert got is not None
    assert got == _reference(body, "host")
    entries, total = got
    assert total == sum(len(values) for _, values in streams)
    assert [ts for _, ts, _ in entries] == sorted(ts for _, values in streams for ts, _ in values)


def test_the_edges_of_lokis_time() -> None:
    def one(ts: str) -> dict[str, Any]:
        return _answer([{"stream": {"host": "n"}, "values": [[ts, "line"]]}])

    assert _read(one(str(MAX_NS))) == ([("n", MAX_NS, "line")], 1)
    assert _read(one("0")) == ([("n", 0, "line")], 1)
    assert _read(one("0" * 19)) == ([("n", 0, "line")], 1)
    for refused in (str(MAX_NS + 1), "9" * 19, "0" * 20, "", "\u0661", "1 "):
        assert _read(one(refused)) is None, refused


def test_entries_of_a_stream_without_the_host_label_are_counted_not_kept() -> None:
    body = _answer([
        {"stream": {"job": "j"}, "values": [["2", "x"], ["1", "y"]]},
        {"stream": {"host": 7}, "values": [["3", "z"]]},
        {"stream": {"host": "n"}, "values": [["5", "a"], ["4", "b", {"trace_id": "t"}]]},
    ])
    assert _read(body) == ([("n", 4, "b"), ("n", 5, "a")], 5)


@pytest.mark.parametrize("args", [
    ("not a list", "host"),
    (({"stream": {}, "values": []},), "host"),  # a tuple, not a list
    ([], b"host"),
    ([], None),
    ([],),
])
def test_the_compiled_reader_refuses_what_is_not_its_input(args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        _read_streams(*args)


def test_a_label_whose_comparison_runs_code_is_read_as_python_reads_it() -> None:
    class Noisy(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            streams.clear()  # the answer changed while it is read: the stream being read is held
            return str.__eq__(self, other)

    streams: list[Any] = []
    streams.append({"stream": {Noisy("host"): "n"}, "values": [["1", "x"]]})
    streams.append({"stream": {"host": "m"}, "values": [["2", "y"]]})
    entries, total = _read_streams(streams, "host")
    assert (entries, total) == ([("n", 1, "x")], 1)
