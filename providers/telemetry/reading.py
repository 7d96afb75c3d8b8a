"""Reading files and folders the same bounded way in every signal's source and in `check`.

Every file is opened without blocking (a FIFO swapped in must never hold a thread) and only when it is a regular
file; folders are listed in name order, and what an entry is (folder, file, or why neither) is said in words; a
`.gz` file is inflated by one bounded reader (`GzipReader`). The catalogues shipped beside the code are read as CSV
whose `#` lines are their header (`data_rows`).
"""

from __future__ import annotations

import csv
import gzip
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def data_rows(text: str) -> csv.DictReader[str]:
    """The rows of a catalogue shipped as data: CSV whose `#` lines (its header of sources and counts) are no rows."""
    return csv.DictReader(line for line in text.splitlines() if line and not line.startswith("#"))


class NotRegular(Exception):
    """The path is not a regular file (a FIFO, socket or device, perhaps swapped in since it was listed)."""


def open_regular(path: Path) -> tuple[BinaryIO, int]:
    # O_NONBLOCK: opening a FIFO must never wait for a writer; a regular file reads the same either way.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular()
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def whole_lines(data: bytes, from_start: bool, at_end: bool) -> bytes:
    """Drop the partial line a bounded read cut at either end (a read with no newline at all is one line)."""
    if not at_end:
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else data
    if not from_start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data




def list_folder(path: Path) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


def newest_first(entries: list[os.DirEntry[str]]) -> list[os.DirEntry[str]]:
    """Folder entries by modification time, the newest first (one that cannot be looked at last): what a check lists
    of a tree of workloads, whose newest are the ones being asked about."""

    def modified(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(entries, key=modified, reverse=True)


def entry_kind(entry: os.DirEntry[str]) -> str:
    """dir, file, or why neither (symlinks are followed, as the source follows them)."""
    try:
        if entry.is_dir():
            return "dir"
        if entry.is_file():
            return "file"
        if entry.is_symlink():
            return "a symbolic link to nothing that exists"
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def nested_holds_anything(path: str) -> bool | None:
    """Whether a folder holds any entry (only the first is looked at); None when it cannot be listed."""
    try:
        with os.scandir(path) as it:
            return next(it, None) is not None
    except OSError:
        return None


class GzipReader:
    """A `.gz` file's inflated bytes, read from its start: the one way every source and `check` inflate a file.

    At most `max_inflated` bytes are handed out (None: up to the stream's end): a small file that inflates to
    gigabytes costs no more than the bound. `complete` says whether the stream's end was reached, `at_bound` whether
    the bound stopped the reading first. The file object it reads may count or ration what it hands out (the
    sources' byte counts and budgets); a corrupt or cut stream raises what `gzip` raises (OSError, EOFError,
    zlib.error).
    """

    def __init__(self, fileobj: BinaryIO, max_inflated: int | None = None) -> None:
        self._stream = gzip.GzipFile(fileobj=fileobj, mode="rb")
        self.max_inflated = max_inflated
        self.inflated = 0
        self.complete = False

    @property
    def at_bound(self) -> bool:
        return self.max_inflated is not None and self.inflated >= self.max_inflated

    def read(self, size: int) -> bytes:
        """Up to `size` inflated bytes; b"" at the stream's end or at the bound."""
        if self.max_inflated is not None:
            size = min(size, self.max_inflated - self.inflated)
            if size <= 0:
                return b""
        data = self._stream.read(size)
        if not data:
            self.complete = True
        self.inflated += len(data)
        return data

    def chunks(self, size: int) -> Iterator[bytes]:
        """The inflated bytes in chunks of at most `size`, to the stream's end or the bound."""
        while True:
            chunk = self.read(size)
            if not chunk:
                return
            yield chunk

    def tail(self, keep: int, size: int, kept: bytes = b"") -> bytes:
        """Read on to the end (or the bound) in chunks of `size`, returning the last `keep` bytes, `kept` (bytes
        already read) before them."""
        last = bytearray(kept[-keep:] if keep else b"")
        for chunk in self.chunks(size):
            last += chunk
            if len(last) > keep:
                del last[: len(last) - keep]
        return bytes(last)
