"""The SQLite database's files are toolwire's alone: the directory toolwire makes for it is
0700, the database file is created 0600 (SQLite gives its `-wal` and `-shm` files the database
file's mode), and a database or directory others can read is warned about at start-up.

They hold every tenant's responses, the API keys' hashes and the server secret that seals
stored requests, so "readable by every local user" (0644 in a 0755 directory, what the umask
gives) is a leak. Existing files are not changed behind the operator's back: a warning says what
to run instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("toolwire.store")

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_directory(directory: Path) -> None:
    """Make `directory` (0700) if it is missing; parents as the umask says."""
    if not directory.exists():
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=PRIVATE_DIR)
            os.chmod(directory, PRIVATE_DIR)  # mkdir's mode passes through the umask


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names, or None (another database, or in memory)."""
    if not url.startswith("sqlite"):
        return None
    _, _, rest = url.partition(":///")
    path = rest.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return Path(path)


def prepare_sqlite_file(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it; warn when an existing one, or
    its directory, is open to others."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        _warn_if_open(path)
    except OSError:
        return  # SQLite says what is wrong (a missing directory, say) when it opens it
    else:
        os.close(fd)
    _warn_if_open(path.parent, directory=True)


def _warn_if_open(path: Path, *, directory: bool = False) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return
    if directory:
        if mode & 0o007:
            log.warning(
                "the database directory %s is open to every local user (mode %04o): they can "
                "read the -wal file SQLite keeps there; run `chmod 700 %s`",
                path,
                mode,
                path,
            )
        return
    if mode & 0o077:
        log.warning(
            "the database %s is readable by other users (mode %04o): it holds every tenant's "
            "responses, key hashes and the server secret; run `chmod 600 %s*`",
            path,
            mode,
            path,
        )
