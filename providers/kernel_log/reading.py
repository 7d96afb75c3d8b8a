"""Reading files and folders the same bounded way in every signal's source and in `check`.

Every file is opened without blocking (a FIFO swapped in must never hold a thread) and only when it is a regular
file; folders are listed in name order, and what an entry is (folder, file, or why neither) is said in words.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


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
