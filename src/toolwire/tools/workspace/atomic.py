"""Atomic file replacement: a write either lands whole or not at all, never over a change it
did not see, and never outside the workspace.

The new bytes go to a temporary file created in the target's directory (same filesystem, so the
rename is atomic), are fsynced, and replace the target only if the target's content hash is
still the one the caller read; the directory is fsynced afterwards so the rename survives a
crash. Every step is relative to a descriptor of that directory reached by `beneath.open_dir`
(`openat`, `renameat`), so a directory swapped for a symlink meanwhile cannot redirect it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

from toolwire.tools.workspace.beneath import lstat_in, open_dir
from toolwire.tools.workspace.errors import EditConflictError, WorkspaceError

#: `expect_sha256` value meaning "the file must not exist yet".
ABSENT = "absent"
_NEW_FILE_MODE = 0o644


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current_sha256(dir_fd: int, name: str) -> str:
    """The content hash of `name` in `dir_fd` now (not following a symlink), or `ABSENT`."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except FileNotFoundError:
        return ABSENT
    with os.fdopen(fd, "rb") as handle:
        return sha256_hex(handle.read())


def atomic_write(
    root: Path, path: Path, data: bytes, *, expect_sha256: str | None, display: str
) -> None:
    """Replace `path` (canonical, inside `root`) with `data` atomically.

    `expect_sha256` is the hash the caller based its change on (`ABSENT` for a new file, None to
    skip the check); it is compared right before the rename, and a mismatch raises
    `EditConflictError` without touching the file. `display` names the file in messages.
    Missing parent directories are created. As root, the file keeps its owner (a new one gets
    its directory's), so `exec`, running as the workspace's user, can still change it.
    """
    name = path.name
    with open_dir(root, path.parent, display=display, create=True) as dir_fd:
        before = lstat_in(dir_fd, name)
        if before is not None and not stat.S_ISREG(before.st_mode):
            what = "a directory" if stat.S_ISDIR(before.st_mode) else "not a regular file"
            raise WorkspaceError(f"{display} is {what}; nothing was written")
        mode = stat.S_IMODE(before.st_mode) if before is not None else _NEW_FILE_MODE
        owner = before if before is not None else os.fstat(dir_fd)
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            temp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dir_fd,
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                if os.geteuid() == 0:
                    os.fchown(handle.fileno(), owner.st_uid, owner.st_gid)
                os.fsync(handle.fileno())
            if expect_sha256 is not None:
                now = current_sha256(dir_fd, name)
                if now != expect_sha256:
                    raise EditConflictError(_conflict_message(display, expect_sha256, now))
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        with contextlib.suppress(OSError):  # some filesystems refuse directory fsync
            os.fsync(dir_fd)


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
