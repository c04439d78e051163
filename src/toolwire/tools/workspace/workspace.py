"""The workspace: one directory the tools may touch, its limits, and its shared edit state.

Every path a tool receives goes through `Workspace.resolve`, which resolves symlinks and `..`
first and then checks the result lies inside the (resolved) root, so no spelling of a path,
and no symlink, reaches outside. Absolute paths are accepted when they point inside the root:
models often echo back absolute paths they were shown, and refusing them would only cost a
round trip.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import sysconfig
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.sandbox import (
    NOBODY,
    Sandbox,
    SandboxMode,
    detect,
    log,
    run_as,
    warn_if_unsandboxed,
)

_MAX_PATCHES = 256


@dataclass(slots=True, frozen=True)
class Patch:
    """An edit shown by `preview_edit`, applied later by `edit_file(patch_id=...)` only if the
    file still has the content it was previewed against."""

    id: str
    path: Path
    display: str
    base_sha256: str
    new_content: bytes


class Workspace:
    """A root directory plus what the tools may do in it.

    `allow_write` enables `edit_file` and `create_file`; `allow_exec` enables `exec`. Limits:
    `max_read_bytes` (files above it are not loaded whole), `max_output_chars` (the most text
    one tool result produces), `max_line_chars` (longer lines are cut when shown),
    `max_find_results`, `max_exec_timeout` (seconds). `use_ripgrep=False` forces the pure-Python
    search even when `rg` is installed. `exec_sandbox` (`auto`, `bwrap`, `none`) and
    `exec_memory_mb`, `exec_max_processes`, `exec_max_file_mb` say how `exec` commands run
    (see `sandbox.py`).
    """

    def __init__(
        self,
        root: Path | str,
        *,
        allow_write: bool = False,
        allow_exec: bool = False,
        max_read_bytes: int = 1024 * 1024,
        max_output_chars: int = 32_000,
        max_line_chars: int = 2_000,
        max_find_results: int = 1_000,
        max_exec_timeout: float = 600.0,
        use_ripgrep: bool = True,
        exec_sandbox: SandboxMode = "auto",
        exec_memory_mb: int = 4096,
        exec_max_processes: int = 256,
        exec_max_file_mb: int = 1024,
    ) -> None:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace root {str(root)!r} is not a directory")
        self.root = resolved
        self.allow_write = allow_write
        self.allow_exec = allow_exec
        self.max_read_bytes = max_read_bytes
        self.max_output_chars = max_output_chars
        self.max_line_chars = max_line_chars
        self.max_find_results = max_find_results
        self.max_exec_timeout = max_exec_timeout
        self.exec_sandbox: SandboxMode = exec_sandbox
        self.exec_memory_mb = exec_memory_mb
        self.exec_max_processes = exec_max_processes
        self.exec_max_file_mb = exec_max_file_mb
        self._sandbox: Sandbox | None = None
        self.rg_path: str | None = find_ripgrep() if use_ripgrep else None
        self._patches: OrderedDict[str, Patch] = OrderedDict()
        self._locks: dict[Path, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return (
            f"Workspace({str(self.root)!r}, allow_write={self.allow_write}, "
            f"allow_exec={self.allow_exec})"
        )

    # -- exec ----------------------------------------------------------------------------------

    @property
    def sandbox(self) -> Sandbox:
        """How `exec` runs here, probed on first use (raises in `bwrap` mode without bwrap)."""
        if self._sandbox is None:
            self._sandbox = detect(self.exec_sandbox)
        return self._sandbox

    def check_sandbox(self) -> Sandbox:
        """Probe now (at start-up) and warn if commands will run unsandboxed."""
        sandbox = self.sandbox
        warn_if_unsandboxed(sandbox)
        if sandbox.active and run_as(self.root) == (NOBODY, NOBODY):
            log.warning(
                "toolwire runs as root and the workspace %s belongs to root: exec commands run "
                "as uid %d (nobody) and can write only where others may. Give the workspace to "
                "an unprivileged user (chown) and exec runs as that user; see docs/security.md",
                self.root,
                NOBODY,
            )
        return sandbox

    # -- paths ---------------------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """The real path `path` names, guaranteed inside the root; raises `WorkspaceError`.

        Relative paths are taken from the root; `""` means the root. Symlinks are followed
        before the check, so a link pointing out is refused like `../` is.
        """
        text = os.fspath(path)
        if "\x00" in text:
            shown = text.replace("\x00", "\\0")
            raise WorkspaceError(
                f"path '{shown}' contains a NUL byte; "
                "paths must be plain text relative to the workspace root"
            )
        given = Path(text.strip()) if text.strip() else Path(".")
        candidate = given if given.is_absolute() else self.root / given
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # symlink loops, unreadable components
            raise WorkspaceError(f"path {text!r} cannot be resolved: {exc}") from None
        if resolved == self.root or resolved.is_relative_to(self.root):
            return resolved
        raise WorkspaceError(self._escape_message(text, given, candidate))

    def display(self, path: Path) -> str:
        """`path` (already resolved) as the model should see it: relative to the root, with
        forward slashes; the root itself is `.`."""
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix()

    def resolve_dir(self, path: str) -> Path:
        """`resolve` for arguments that must name an existing directory."""
        resolved = self.resolve(path)
        if not resolved.exists():
            raise WorkspaceError(f"no such directory: {path}")
        if not resolved.is_dir():
            raise WorkspaceError(f"{path} is a file, not a directory")
        return resolved

    def _escape_message(self, text: str, given: Path, candidate: Path) -> str:
        hint = "use a path relative to the workspace root, for example 'src/main.py'"
        if given.is_absolute():
            lexical = Path(os.path.normpath(candidate))
            if not lexical.is_relative_to(self.root):
                return f"absolute path {text!r} is outside the workspace root; {hint}"
        else:
            lexical_rel = PurePosixPath(os.path.normpath(given.as_posix()))
            if lexical_rel.parts[:1] == ("..",):
                return f"path {text!r} uses '..' to leave the workspace root; {hint}"
        return (
            f"path {text!r} goes through a symlink that points outside the workspace root; "
            "only files inside the root can be used"
        )

    # -- shared edit state ---------------------------------------------------------------------

    def lock(self, path: Path) -> asyncio.Lock:
        """The lock serialising writes to one file (in this process)."""
        lock = self._locks.get(path)
        if lock is None:
            lock = self._locks[path] = asyncio.Lock()
        return lock

    def remember(self, patch: Patch) -> None:
        self._patches[patch.id] = patch
        self._patches.move_to_end(patch.id)
        while len(self._patches) > _MAX_PATCHES:
            self._patches.popitem(last=False)

    def patch(self, patch_id: str) -> Patch:
        found = self._patches.get(patch_id.strip())
        if found is None:
            raise WorkspaceError(
                f"unknown patchId {patch_id!r} (already applied, or never previewed here); "
                "run preview_edit again to get a new one"
            )
        return found

    def forget(self, patch_id: str) -> None:
        self._patches.pop(patch_id, None)


def find_ripgrep() -> str | None:
    """The `rg` binary: the one installed with this Python (the `ripgrep` package) first,
    then whatever is on PATH."""
    name = "rg.exe" if sys.platform == "win32" else "rg"
    candidates = [Path(sys.executable).parent / name]
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(Path(scripts) / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("rg")
