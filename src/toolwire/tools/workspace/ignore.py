"""Which files the search tools see: `.gitignore` rules, no `.git/`, no symlinks.

The rules, shared by `find`, `grep`, `search_files` and the pure-Python search (and given to
ripgrep as the equivalent flags, so both backends see the same files):
- every `.gitignore` inside the workspace applies to its directory and below, deeper files
  taking precedence, last matching line winning (git's semantics, through `pathspec`), nested
  repositories included (as ripgrep does); files above the root, global excludes,
  `.git/info/exclude`, `.ignore`/`.rgignore` do not apply;
- an ignored directory is not entered; a directory named explicitly as the search path is
  searched even if ignored (the `.gitignore` files inside it still apply);
- anything named `.git` is skipped; hidden files are searched;
- symlinks are neither followed nor listed, and only regular files are listed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pathspec

_GIT = ".git"


def path_key(relative: str) -> tuple[str, ...]:
    """Sort key giving the order of a depth-first walk with names sorted per directory
    (ripgrep's `--sort path` order): `a/b` before `a.txt`."""
    return tuple(relative.split("/"))


class IgnoreRules:
    """The `.gitignore` files of one workspace, loaded lazily and cached per directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, pathspec.GitIgnoreSpec | None] = {}

    def spec(self, directory: str) -> pathspec.GitIgnoreSpec | None:
        """The compiled `.gitignore` of `directory` (root-relative, `""` for the root)."""
        if directory not in self._specs:
            self._specs[directory] = _load_spec(self.root / directory / ".gitignore")
        return self._specs[directory]

    def is_ignored(self, relative: str, *, is_dir: bool, floor: str = "") -> bool:
        """Whether `relative` (root-relative) is ignored by the `.gitignore` files of its
        ancestor directories at or below `floor`; the deepest file with a matching line wins."""
        parts = relative.split("/")
        floor_depth = len(floor.split("/")) if floor else 0
        for depth in range(len(parts) - 1, floor_depth - 1, -1):
            directory = "/".join(parts[:depth])
            spec = self.spec(directory)
            if spec is not None:
                inner = "/".join(parts[depth:]) + ("/" if is_dir else "")
                result = spec.check_file(inner)
                if result.include is not None:
                    return bool(result.include)
        return False

    def is_ignored_anywhere(self, relative: str) -> bool:
        """Whether `relative` (a directory) or one of its ancestors is ignored."""
        parts = relative.split("/") if relative else []
        return any(
            self.is_ignored("/".join(parts[: i + 1]), is_dir=True) for i in range(len(parts))
        )

    def walk(self, base: str) -> Iterator[str]:
        """Root-relative paths of the visible regular files under `base` (a root-relative
        directory, `""` for the root), in `path_key` order."""
        floor = base if base and self.is_ignored_anywhere(base) else ""
        yield from self._walk(base, floor)

    def _walk(self, directory: str, floor: str) -> Iterator[str]:
        try:
            with os.scandir(self.root / directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            return
        for entry in entries:
            if entry.name == _GIT:
                continue
            relative = f"{directory}/{entry.name}" if directory else entry.name
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if not self.is_ignored(relative, is_dir=True, floor=floor):
                        yield from self._walk(relative, floor)
                elif entry.is_file(follow_symlinks=False) and not self.is_ignored(
                    relative, is_dir=False, floor=floor
                ):
                    yield relative
            except OSError:
                continue


def _load_spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except Exception:  # one malformed line must not disable the whole file
        good = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
            except Exception:
                continue
            good.append(line)
        return pathspec.GitIgnoreSpec.from_lines(good)
