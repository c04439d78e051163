"""Atomic file replacement: a write either lands whole or not at all, and never over a change
it did not see.

The new bytes go to a temporary file in the same directory (same filesystem, so `os.replace`
is atomic), are fsynced, and replace the target only if the target's content hash is still the
one the caller read; the directory is fsynced afterwards so the rename survives a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from toolwire.tools.workspace.errors import EditConflictError

#: `expect_sha256` value meaning "the file must not exist yet".
ABSENT = "absent"
_NEW_FILE_MODE = 0o644


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current_sha256(path: Path) -> str:
    """The content hash of `path` now, or `ABSENT` when there is no such file."""
    try:
        return sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return ABSENT


def atomic_write(path: Path, data: bytes, *, expect_sha256: str | None, display: str) -> None:
    """Replace `path` with `data` atomically.

    `expect_sha256` is the hash the caller based its change on (`ABSENT` for a new file, None to
    skip the check); it is compared right before the rename, and a mismatch raises
    `EditConflictError` without touching the file. `display` names the file in messages.
    """
    directory = path.parent
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        if expect_sha256 is not None:
            now = current_sha256(path)
            if now != expect_sha256:
                raise EditConflictError(_conflict_message(display, expect_sha256, now))
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    _fsync_directory(directory)


def _conflict_message(display: str, expected: str, now: str) -> str:
    if expected == ABSENT:
        return (
            f"{display} was created by someone else meanwhile; nothing was written. "
            "Read it, then edit it or pass overwrite=true."
        )
    if now == ABSENT:
        return f"{display} was deleted meanwhile; nothing was written."
    return (
        f"{display} changed since it was read (another edit landed first); nothing was written. "
        "Read the file again and redo the edit against its current content."
    )


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; some filesystems refuse directory fsync, which is fine."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
