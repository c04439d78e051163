"""The typed outputs of the workspace tools.

These are what travels between pipe steps (seed 002): structure stays structure until the
display boundary, where `rendering` turns the last one into plain text. Paths are always
root-relative with forward slashes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(slots=True)
class FileList:
    """`find`'s output: matching files, sorted; `total` counts those left out by the cap."""

    pattern: str
    base: str
    paths: list[str]
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.paths)

    def __len__(self) -> int:
        return len(self.paths)


@dataclass(slots=True, frozen=True)
class GrepLine:
    """One line of search output: a match, or a context line around one."""

    path: str
    line: int
    text: str
    is_match: bool


@dataclass(slots=True)
class GrepResult:
    """`grep`/`search_files` output: lines in file order then line order; `truncated` means
    more matches existed past `max_matches`."""

    pattern: str
    context: int
    lines: list[GrepLine]
    match_count: int
    truncated: bool
    backend: Literal["ripgrep", "python"]
    max_matches: int = 0

    @property
    def files(self) -> list[str]:
        """Files with at least one match, in output order."""
        seen: dict[str, None] = {}
        for line in self.lines:
            if line.is_match:
                seen.setdefault(line.path)
        return list(seen)

    def matches_in(self, path: str) -> list[int]:
        return [line.line for line in self.lines if line.is_match and line.path == path]

    def __len__(self) -> int:
        return self.match_count


@dataclass(slots=True)
class LineWindow:
    """Consecutive lines of a file starting at line `start` (1-based), as shown."""

    start: int
    lines: list[str]

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1


FileKind = Literal["text", "binary", "large", "empty"]


@dataclass(slots=True)
class FileView:
    """What `read_file` shows of one file: line windows, or a `note` saying why not."""

    path: str
    kind: FileKind
    size: int
    windows: list[LineWindow] = field(default_factory=list)
    total_lines: int | None = None
    note: str = ""


@dataclass(slots=True)
class ReadResult:
    """`read_file` output: one view, or several (from a pipe) each under a header."""

    views: list[FileView]
    headers: bool = False
    note: str = ""

    def __len__(self) -> int:
        return len(self.views)


@dataclass(slots=True)
class PatchPreview:
    """`preview_edit` output: the diff the edit would make and the id that applies it."""

    path: str
    patch_id: str
    diff: str


@dataclass(slots=True)
class EditResult:
    """`edit_file` output."""

    path: str
    replacements: int
    bytes_written: int
    sha256: str
    patch_id: str | None = None


@dataclass(slots=True)
class CreateResult:
    """`create_file` output; `created` is false when an existing file was overwritten."""

    path: str
    created: bool
    bytes_written: int
    sha256: str


@dataclass(slots=True)
class ExecResult:
    """`exec` output. `exit_code` is negative when a signal ended the process (-9 after a
    timeout kill); the `*_truncated` flags say the middle of that stream was cut."""

    command: str
    cwd: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    stdout_truncated: bool
    stderr_truncated: bool
