"""`read_file`: a file as `cat -n` shows it, never a JSON representation of it.

Binary files (a NUL byte in the first 8 KiB, or not valid UTF-8) and files over the read cap
are reported as such instead of dumped; a window (`offset`/`limit`) of a file over the cap is
still shown, read line by line without loading the file. Lines end without their `\\r`; lines
longer than the workspace's `max_line_chars` are cut with a marker.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, Field

from toolwire.tools.workspace.beneath import open_file
from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.outputs import (
    FileList,
    FileView,
    GrepResult,
    LineWindow,
    ReadResult,
)
from toolwire.tools.workspace.rendering import number_line, render_read
from toolwire.tools.workspace.workspace import Workspace

BINARY_SNIFF_BYTES = 8192
#: Lines shown around each match when `read_file` follows `grep` in a pipe (at least).
PIPE_MATCH_RADIUS = 5
_NOTE_RESERVE = 300
_MIN_FILE_BUDGET = 400


class ReadFileArguments(StrictArguments):
    path: str = Field(description="File to read, relative to the workspace root.")
    offset: int = Field(1, ge=1, description="Line number to start at (1-based).")
    limit: int = Field(2000, ge=1, le=100_000, description="How many lines to show at most.")


class ReadFile(WorkspaceTool):
    name = "read_file"
    description = (
        "Read a text file. Output is the file's lines as `cat -n` prints them: the line "
        "number right-aligned to width 6, a TAB, then the line exactly as in the file. Use "
        "offset/limit for a window of a long file. Binary files and files over the size cap "
        "are reported, not dumped (a window of a big file still works)."
    )
    Arguments = ReadFileArguments
    accepts = (FileList, GrepResult)

    async def call(self, arguments: BaseModel, upstream: Any) -> ReadResult:
        args = coerce(arguments, ReadFileArguments)
        explicit = bool({"offset", "limit"} & args.model_fields_set)
        if upstream is None:
            path = self.workspace.resolve(args.path)
            view = await asyncio.to_thread(
                read_window,
                self.workspace,
                _require_file(self.workspace, path, args.path),
                args.offset,
                args.limit,
                explicit=explicit,
                budget=self.workspace.max_output_chars,
            )
            return ReadResult([view])
        return await asyncio.to_thread(self._read_many, args, upstream, explicit)

    def render(self, output: Any) -> str:
        return render_read(output)

    def _read_many(self, args: ReadFileArguments, upstream: Any, explicit: bool) -> ReadResult:
        """Several files from a previous step: a `FileList` gives each file's `offset`/`limit`
        window; a `GrepResult` gives windows around each match."""
        base = self.workspace.resolve(args.path)
        paths = upstream.paths if isinstance(upstream, FileList) else upstream.files
        budget = self.workspace.max_output_chars
        views: list[FileView] = []
        for index, display in enumerate(paths):
            path = self.workspace.resolve(display)
            if not (path == base or path.is_relative_to(base)) or not path.is_file():
                continue
            if budget < _MIN_FILE_BUDGET:
                left = len(paths) - index
                note = f"[{left} more files not shown: output cap reached; read them one by one]"
                return ReadResult(views, headers=True, note=note)
            if isinstance(upstream, GrepResult):
                radius = max(upstream.context, PIPE_MATCH_RADIUS)
                view = read_around(
                    self.workspace, path, upstream.matches_in(display), radius, args.limit, budget
                )
            else:
                view = read_window(
                    self.workspace, path, args.offset, args.limit, explicit=explicit, budget=budget
                )
            budget -= _view_size(view)
            views.append(view)
        return ReadResult(views, headers=True)


def _require_file(workspace: Workspace, path: Path, given: str) -> Path:
    """`path` if it is a regular file; otherwise an error that says what to do instead."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise WorkspaceError(_missing_message(workspace, path, given)) from None
    if stat.S_ISDIR(mode):
        raise WorkspaceError(f"{given} is a directory; use find to list its files")
    if not stat.S_ISREG(mode):
        raise WorkspaceError(f"{given} is not a regular file (a device, socket or pipe)")
    return path


def _missing_message(workspace: Workspace, path: Path, given: str) -> str:
    message = f"no such file: {given}"
    parent = path.parent
    try:
        names = [entry.name for entry in parent.iterdir()]
    except OSError:
        return message
    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    if close:
        shown = ", ".join(workspace.display(parent / name) for name in close)
        message += f". Did you mean: {shown}?"
    return message


@dataclass(slots=True)
class _Lines:
    """A file's lines as text: all of them (`complete`), or the first ones of a big file."""

    lines: list[str]
    complete: bool
    size: int


def load_lines(
    workspace: Workspace, path: Path, *, upto: int | None, allow_large: bool
) -> _Lines | FileView:
    """The lines of `path`, or a `FileView` saying why they are not shown (binary, empty,
    over the cap). A file over the cap is read line by line up to line `upto` (+1, to know
    whether more follow) when `allow_large`."""
    display = workspace.display(path)
    try:
        fd = open_file(workspace.root, path, display=display)
    except FileNotFoundError:
        return FileView(display, "empty", 0, total_lines=0, note=f"[{display} was just deleted]")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        size = info.st_size
        if not stat.S_ISREG(info.st_mode):
            return _binary(display, size, "it is not a regular file")
        head = handle.read(BINARY_SNIFF_BYTES)
        if b"\x00" in head:
            return _binary(display, size, "it contains NUL bytes")
        if size > workspace.max_read_bytes:
            if not allow_large:
                return FileView(display, "large", size, note=_large_note(workspace, display, size))
            handle.seek(0)
            return _stream_lines(handle, display, size, upto)
        data = head + handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _binary(display, size, f"it is not valid UTF-8 text (byte {exc.start})")
    if not text:
        return FileView(display, "empty", 0, total_lines=0, note=f"[{display} is empty]")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return _Lines([_strip_cr(line) for line in lines], True, size)


def _stream_lines(handle: BinaryIO, display: str, size: int, upto: int | None) -> _Lines | FileView:
    wanted = (upto or 0) + 1
    lines: list[str] = []
    for raw in handle:
        try:
            lines.append(_strip_cr(raw.decode("utf-8").removesuffix("\n")))
        except UnicodeDecodeError:
            return _binary(display, size, f"line {len(lines) + 1} is not valid UTF-8 text")
        if len(lines) >= wanted:
            return _Lines(lines, False, size)
    return _Lines(lines, True, size)


def read_window(
    workspace: Workspace, path: Path, offset: int, limit: int, *, explicit: bool, budget: int
) -> FileView:
    """Lines `offset` .. `offset + limit - 1` of `path`, within `budget` characters."""
    loaded = load_lines(workspace, path, upto=offset + limit - 1, allow_large=explicit)
    if isinstance(loaded, FileView):
        return loaded
    display = workspace.display(path)
    total = len(loaded.lines) if loaded.complete else None
    if offset > len(loaded.lines):
        count = f"{len(loaded.lines)} lines" if loaded.complete else "fewer lines"
        note = f"[{display} has {count}; offset {offset} is past the end]"
        return FileView(display, "text", loaded.size, total_lines=total, note=note)
    wanted = loaded.lines[offset - 1 : offset - 1 + limit]
    window, cut = _fit(workspace, offset, wanted, budget - _NOTE_RESERVE)
    note = ""
    if window.end < len(loaded.lines):
        of = f" of {total}" if total is not None else ""
        why = f" (output cap of {budget} characters)" if cut else ""
        span = f"lines {window.start}-{window.end}{of} shown{why}"
        note = f"[{span}; read on with offset={window.end + 1}]"
    return FileView(display, "text", loaded.size, [window], total, note)


def read_around(
    workspace: Workspace, path: Path, matches: list[int], radius: int, limit: int, budget: int
) -> FileView:
    """Windows of `radius` lines around each of `matches` (merged when they touch), at most
    `limit` lines in all, within `budget` characters."""
    upto = max(matches, default=0) + radius
    loaded = load_lines(workspace, path, upto=upto, allow_large=True)
    if isinstance(loaded, FileView):
        return loaded
    display = workspace.display(path)
    total = len(loaded.lines) if loaded.complete else None
    spans: list[tuple[int, int]] = []
    for line in sorted(matches):
        start, end = max(1, line - radius), min(len(loaded.lines), line + radius)
        if spans and start <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    windows: list[LineWindow] = []
    left_lines, left_chars = limit, budget - _NOTE_RESERVE
    note = ""
    for start, end in spans:
        wanted = loaded.lines[start - 1 : min(end, start - 1 + left_lines)]
        window, cut = _fit(workspace, start, wanted, left_chars)
        windows.append(window)
        left_lines -= len(window.lines)
        left_chars -= sum(len(line) + 8 for line in window.lines)
        if cut or left_lines <= 0:
            if window.end < spans[-1][1]:
                note = f"[stopped at line {window.end}: output cap reached]"
            break
    return FileView(display, "text", loaded.size, windows, total, note)


def _fit(
    workspace: Workspace, start: int, lines: list[str], budget: int
) -> tuple[LineWindow, bool]:
    """As many of `lines` as fit `budget` characters once numbered (at least one), each cut
    to `max_line_chars`; the flag says lines were left out for the budget."""
    shown: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        line = cut_line(line, workspace.max_line_chars)
        cost = len(number_line(start + index, line)) + 1
        if shown and used + cost > budget:
            return LineWindow(start, shown), True
        shown.append(line)
        used += cost
    return LineWindow(start, shown), False


def cut_line(line: str, limit: int) -> str:
    """`line`, or its first `limit` characters and a marker saying how many more there were."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [line cut: {len(line) - limit} more characters]"


def _view_size(view: FileView) -> int:
    return sum(sum(len(line) + 8 for line in w.lines) for w in view.windows) + len(view.note) + 20


def _binary(display: str, size: int, why: str) -> FileView:
    return FileView(
        display,
        "binary",
        size,
        note=f"[{display} is a binary file ({size} bytes): {why}; not shown]",
    )


def _large_note(workspace: Workspace, display: str, size: int) -> str:
    return (
        f"[{display} is {human_size(size)} ({size} bytes), over the "
        f"{human_size(workspace.max_read_bytes)} read cap; not shown whole. Pass offset and "
        "limit to read a window (for example offset=1, limit=200), or grep it]"
    )


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _strip_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line
