"""The one literal search both rooms use (`providers.telemetry.literals`, compiled in `_literals.c`): every match of
every text, as the texts are, whatever bytes they hold."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.compiled import compiled
from providers.telemetry.literals import Literals


def _every_match(words: list[str], data: bytes) -> list[tuple[int, int]]:
    found = []
    for ident, word in enumerate(words):
        needle = word.encode()
        at = data.find(needle)
        while at >= 0:
            found.append((at + len(needle), ident))
            at = data.find(needle, at + 1)
    return sorted(found)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"NVRM: Xid (PCI:0000:07:00): 79\nno keyword\nSXid and NVRM on one line\n",
        b"aaaa",  # overlapping matches of one text
        "Cuda failure 'invalid argument' \u00e9 [rank0]: a.b*c+d (x) $^ \\ \t\x00".encode(),
    ],
)
def test_every_match_of_every_text_with_its_index(data: bytes) -> None:
    words = ["NVRM", "SXid", "aa", "a.b*c+d", "(x)", "$^", "\\", "\u00e9", "\x00", "[rank", "Cuda failure '"]
    assert Literals(words).ends(data) == _every_match(words, data)


@pytest.mark.parametrize(
    "words",
    [
        ["\x00", "\x1b"],  # one-byte texts alone: no Hyperscan database
        ["\x1b", "\x1b[0m", "NVRM", "\x00", "a"],  # one byte, also the start of a longer text
    ],
)
def test_one_byte_texts_found_apart_are_every_match_with_its_index(words: list[str]) -> None:
    data = b"\x1b[0mNVRM\x00\x00 a \x1b\x1b\nNVRM\x1b[0m a\x00"
    assert Literals(words).ends(data) == _every_match(words, data)
    assert Literals(words).ends(b"\x00" * 5000 + b"\x1b") == _every_match(words, b"\x00" * 5000 + b"\x1b")


def test_no_text_or_an_empty_one_is_refused() -> None:
    for words in ([], ["NVRM", ""]):
        with pytest.raises(ValueError, match="none of them empty"):
            Literals(words)


#: a small alphabet, so that texts overlap, repeat, share starts and ends, and hold bytes every syntax treats apart
_BYTES = st.sampled_from(["a", "b", "\n", "\x00", "\x1b", ".", "*", "\\", "(", "[", "\u00e9"])


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.text(_BYTES, min_size=1, max_size=4), min_size=1, max_size=8),
    st.text(_BYTES, max_size=300),
)
def test_any_texts_in_any_data_give_every_match_as_bytes_find_finds_it(words: list[str], text: str) -> None:
    data = text.encode()
    assert Literals(words).ends(data) == _every_match(words, data)
    assert Literals(words).ends(bytearray(data)) == _every_match(words, data)  # any buffer


def test_a_buffer_of_many_matches_gives_them_all() -> None:
    words = ["a", "aa", "aaa", "ab"]
    data = b"a" * 200_000 + b"b"
    found = Literals(words).ends(data)
    assert len(found) == 200_000 + 199_999 + 199_998 + 1
    assert found == _every_match(words, data)


def test_the_compiled_search_refuses_what_is_no_text() -> None:
    search = compiled("providers.telemetry._literals").Search
    with pytest.raises(ValueError, match="none of them empty"):
        search(())
    with pytest.raises(ValueError, match="none of them empty"):
        search((b"NVRM", b""))
    with pytest.raises(TypeError, match="bytes"):
        search((b"NVRM", "SXid"))
    with pytest.raises(TypeError):
        search([b"NVRM"])  # a tuple of texts
    with pytest.raises(TypeError):
        search((b"NVRM",)).ends("not a buffer")


def test_threads_scan_at_once() -> None:
    search = Literals(["NVRM", "SXid"])
    data = b"NVRM SXid\n" * 2000
    want = _every_match(["NVRM", "SXid"], data)
    results: list[bool] = []

    def scan() -> None:
        results.extend(search.ends(data) == want for _ in range(20))

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [True] * 80
