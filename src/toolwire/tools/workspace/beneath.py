"""Open files beneath the workspace root through directory file descriptors, never by name.

`Workspace.resolve` turns what the model wrote into a canonical path inside the root (symlinks
followed, `..` gone), but a check on a name is only as good as the moment it is made: `exec`
runs beside the writer tools and can swap a directory for a symlink to `/etc` between the check
and the write. So every tool that touches a file re-walks the canonical path here, one component
at a time from a descriptor of the root, with `O_NOFOLLOW` (and `O_DIRECTORY` on the way down):
a component that is a symlink *now* fails the walk instead of being followed, and the final
create and rename happen relative to the directory descriptor the walk ended on (`openat`,
`renameat`), so no later swap can redirect them.

Hand-written rather than `openat2(RESOLVE_BENEATH)`: Python's `os` module has no `openat2`,
glibc has no wrapper for it, and container seccomp profiles often refuse it (ENOSYS), so it
would need a ctypes syscall plus this walk as the fallback anyway. The walk uses only `openat`
with `dir_fd`, which every POSIX kernel has, and the canonical path it walks contains no `..`
and (by construction) no symlinks, so refusing every symlink loses nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from toolwire.tools.workspace.errors import WorkspaceError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RACE = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def _moved(display: str) -> WorkspaceError:
    return WorkspaceError(
        f"{display} changed while in use (a directory on its path was replaced, by a symlink "
        "or a file); nothing was done. Try again."
    )


def _parts(root: Path, path: Path) -> tuple[str, ...]:
    """`path`'s components below `root`; refuses anything that is not plainly beneath."""
    parts = path.relative_to(root).parts
    if any(part in ("", ".", "..") for part in parts):  # resolve() never yields these
        raise WorkspaceError(f"{path} is not a canonical path beneath the workspace root")
    return parts


def _open_root(root: Path) -> int:
    return os.open(root, _DIR_FLAGS)


@contextlib.contextmanager
def open_dir(root: Path, path: Path, *, display: str, create: bool = False) -> Iterator[int]:
    """A descriptor of directory `path` (canonical, inside `root`), reached without following
    any symlink; `create` makes missing directories on the way (`mkdirat`), owned like their
    parent when toolwire runs as root. Closed on exit."""
    fd = _open_root(root)
    try:
        for part in _parts(root, path):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                    _own_like_parent(fd, part)
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _RACE:
                        raise _moved(display) from None
                    raise
            except OSError as exc:
                if exc.errno in _RACE:
                    if create:
                        raise WorkspaceError(
                            f"cannot create {display}: a parent of it is a file"
                        ) from None
                    raise _moved(display) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_file(root: Path, path: Path, *, display: str) -> int:
    """A read-only descriptor of regular file `path`, reached without following symlinks.

    Opened non-blocking (a FIFO swapped in must not hang the reader), then switched back."""
    with open_dir(root, path.parent, display=display) as dir_fd:
        try:
            fd = os.open(
                path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
            )
        except OSError as exc:
            if exc.errno in _RACE:
                raise _moved(display) from None
            raise
    os.set_blocking(fd, True)
    return fd


def read_bytes(root: Path, path: Path, *, display: str) -> bytes:
    """The whole content of `path`, read through `open_file`."""
    with os.fdopen(open_file(root, path, display=display), "rb") as handle:
        return handle.read()


def lstat_in(dir_fd: int, name: str) -> os.stat_result | None:
    """`name`'s own status in `dir_fd` (a symlink is not followed), None when absent."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _own_like_parent(dir_fd: int, name: str) -> None:
    """As root, hand a new directory to the owner of its parent (the workspace's user), so
    that `exec`, which runs as that user, can use it."""
    if os.geteuid() != 0:
        return
    parent = os.fstat(dir_fd)
    with contextlib.suppress(OSError):
        os.chown(name, parent.st_uid, parent.st_gid, dir_fd=dir_fd, follow_symlinks=False)
