"""The two search backends behind `grep`: ripgrep when installed, pure Python otherwise.

Both produce the same typed lines for the same tree, so the rendered text is identical:
- the same files: ripgrep gets flags matching `ignore.IgnoreRules` when it walks the root
  itself, and an explicit file list (from the Python walker) otherwise;
- the same binary rule: a file with a NUL byte anywhere is skipped whole. Each file's lines
  are held until its end is reached; ripgrep (no memory maps, so it sees every byte) reports
  where it met a NUL in its `end` message, the Python search checks every line;
- the same lines: split on `\\n`, matched with their `\\r`, shown without it; invalid UTF-8
  shown as U+FFFD; context merged the way ripgrep merges it;
- the same order (`ignore.path_key`) and the same cap: the first `max_matches` matches, the
  after-context of the last one, and `truncated` when one more match exists.
The regex dialects differ at the edges (Rust's `regex` crate vs Python's `re`); they agree on
the common syntax (classes, `\\b`, `\\d`, `\\s`, `\\w`, groups, alternation, anchors).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import signal
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from toolwire.tools.workspace.beneath import open_file
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.outputs import GrepLine

_ARGV_CHUNK_CHARS = 100_000
_SCAN_CHUNK = 1024 * 1024
_STREAM_LIMIT = 64 * 1024 * 1024
_RG_FLAGS = (
    "--json",
    "--no-config",
    "--no-messages",
    "--no-mmap",
    "--encoding=none",
    "--sort=path",
)
#: What makes ripgrep's own walk see exactly what `IgnoreRules.walk("")` sees.
_RG_WALK_FLAGS = (
    "--hidden",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-ignore-global",
    "--no-ignore-parent",
    "--no-ignore-exclude",
    "--glob=!.git",
)


@dataclass(slots=True, frozen=True)
class Query:
    pattern: str
    ignore_case: bool = False
    fixed_strings: bool = False
    context: int = 0
    max_matches: int = 200

    def compiled(self) -> re.Pattern[str]:
        """The pattern for the Python backend; errors are worded for the model."""
        source = re.escape(self.pattern) if self.fixed_strings else self.pattern
        try:
            return re.compile(source, re.IGNORECASE if self.ignore_case else 0)
        except re.error as exc:
            raise WorkspaceError(
                f"invalid regular expression {self.pattern}: {exc}. Escape special characters "
                "or pass fixed_strings=true to search for the text literally"
            ) from None


@dataclass(slots=True)
class FileBuffer:
    """One file's lines, held until the file is known not to be binary. Stores at most
    `wanted` matches (and the lines before the last): past that nothing more is needed."""

    path: str
    wanted: int
    lines: list[GrepLine] = field(default_factory=list)
    matches: int = 0

    @property
    def full(self) -> bool:
        return self.matches >= self.wanted

    def add(self, number: int, text: str, is_match: bool) -> None:
        if self.full:
            return
        self.lines.append(GrepLine(self.path, number, text, is_match))
        self.matches += is_match


@dataclass(slots=True)
class Collector:
    """Lines in arrival order, capped at `max_matches` matches plus that last match's
    after-context; `done` tells a backend it can stop."""

    query: Query
    lines: list[GrepLine] = field(default_factory=list)
    match_count: int = 0
    truncated: bool = False
    done: bool = False
    _tail: tuple[str, int] | None = None

    def buffer(self, path: str) -> FileBuffer:
        """A buffer for the next file: one match past the cap is enough to know there are
        more."""
        return FileBuffer(path, self.query.max_matches - self.match_count + 1)

    def commit(self, buffer: FileBuffer) -> None:
        for line in buffer.lines:
            self.add(line.path, line.line, line.text, line.is_match)

    def add(self, path: str, number: int, text: str, is_match: bool) -> None:
        if self.done:
            return
        if self._tail is not None:
            if is_match:
                self.truncated = self.done = True
            elif path == self._tail[0] and number <= self._tail[1]:
                self.lines.append(GrepLine(path, number, text, False))
            return
        self.lines.append(GrepLine(path, number, text, is_match))
        if is_match:
            self.match_count += 1
            if self.match_count >= self.query.max_matches:
                self._tail = (path, number + self.query.context)


def display_text(raw: bytes) -> str:
    """A line as shown: decoded (invalid UTF-8 as U+FFFD), without its `\\r`."""
    text = raw.decode("utf-8", "replace")
    return text[:-1] if text.endswith("\r") else text


# -- pure Python ------------------------------------------------------------------------------


def python_search(root: Path, query: Query, files: Iterable[str]) -> Collector:
    """Search `files` (root-relative, in order) line by line with Python's `re`."""
    regex = query.compiled()
    collector = Collector(query)
    for relative in files:
        try:
            fd = open_file(root, root / relative, display=relative)  # no symlink followed
            with os.fdopen(fd, "rb") as handle:
                found = _search_file(handle, collector.buffer(relative), regex, query.context)
        except (OSError, ValueError, WorkspaceError):
            continue
        if found is not None:
            collector.commit(found)
        if collector.done:
            break
    return collector


def _search_file(
    handle: BinaryIO, out: FileBuffer, regex: re.Pattern[str], context: int
) -> FileBuffer | None:
    """`out` filled with the file's matches and context, or None for a binary file."""
    before: deque[tuple[int, str]] = deque(maxlen=context or None)
    after_left = 0
    for number, raw in enumerate(handle, 1):
        if b"\x00" in raw:
            return None
        line = raw[:-1] if raw.endswith(b"\n") else raw
        text = line.decode("utf-8", "replace")
        if regex.search(text) is not None:
            for earlier, earlier_text in before:
                out.add(earlier, earlier_text, False)
            before.clear()
            out.add(number, display_text(line), True)
            after_left = context
            if out.full:
                break
        elif after_left:
            out.add(number, display_text(line), False)
            after_left -= 1
        elif context:
            before.append((number, display_text(line)))
    while chunk := handle.read(_SCAN_CHUNK):
        if b"\x00" in chunk:
            return None
    return out


# -- ripgrep ----------------------------------------------------------------------------------


async def ripgrep_search(rg: str, root: Path, query: Query, files: list[str] | None) -> Collector:
    """Search with the `rg` binary: the whole root with ripgrep's own walk when `files` is
    None, else exactly `files` (in chunks that fit a command line)."""
    collector = Collector(query)
    if files is None:
        await _run_rg(rg, root, query, [*_RG_WALK_FLAGS, "--", "."], collector)
        return collector
    for chunk in _chunks(files):
        await _run_rg(rg, root, query, ["--no-ignore", "--", *chunk], collector)
        if collector.done:
            break
    return collector


def _chunks(files: list[str]) -> Iterable[list[str]]:
    chunk: list[str] = []
    size = 0
    for relative in files:
        if chunk and size + len(relative) > _ARGV_CHUNK_CHARS:
            yield chunk
            chunk, size = [], 0
        chunk.append(relative)
        size += len(relative) + 1
    if chunk:
        yield chunk


async def _run_rg(rg: str, root: Path, query: Query, targets: list[str], out: Collector) -> None:
    argv = [rg, *_RG_FLAGS]
    if query.ignore_case:
        argv.append("--ignore-case")
    if query.fixed_strings:
        argv.append("--fixed-strings")
    if query.context:
        argv.append(f"--context={query.context}")
    argv += ["--regexp", query.pattern, *targets]
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_STREAM_LIMIT,
    )
    assert process.stdout is not None and process.stderr is not None
    stderr_task = asyncio.ensure_future(process.stderr.read())
    buffer: FileBuffer | None = None
    seen_any = finished = False
    try:
        async for raw in process.stdout:
            message = orjson.loads(raw)
            kind = message.get("type")
            data = message.get("data", {})
            if kind == "begin":
                buffer = out.buffer(_rg_path(data["path"]))
            elif kind in ("match", "context") and buffer is not None:
                seen_any = True
                text = display_text(_rg_bytes(data["lines"]).removesuffix(b"\n"))
                buffer.add(int(data["line_number"]), text, kind == "match")
            elif kind == "end" and buffer is not None:
                if data.get("binary_offset") is None:
                    out.commit(buffer)
                buffer = None
                if out.done:
                    break
        else:
            finished = True
    finally:
        if not finished and process.returncode is None:
            # Not `process.kill()`: it polls, reaping the child behind asyncio's watcher.
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        await process.wait()
        stderr = (await stderr_task).decode("utf-8", "replace").strip()
    if process.returncode == 2 and not seen_any and stderr and not out.done:
        raise WorkspaceError(
            f"ripgrep refused the search: {stderr}. Check the regular expression (or pass "
            "fixed_strings=true to search for the text literally)"
        )


def _rg_path(value: dict[str, Any]) -> str:
    text = value["text"] if "text" in value else os.fsdecode(base64.b64decode(value["bytes"]))
    return text[2:] if text.startswith("./") else text


def _rg_bytes(value: dict[str, Any]) -> bytes:
    if "text" in value:
        return str(value["text"]).encode("utf-8")
    return base64.b64decode(value["bytes"])
