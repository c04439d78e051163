"""The display boundary: each typed output as the plain text the model reads.

Content is never re-encoded: a file line, a match or a diff line appears exactly as in the
file (`\\.ts$` stays `\\.ts$`). Only the shapes around it are ours: `cat -n` line numbers,
`path:line:text`, `key: value` lines for results with fields the model acts on. Notes about
what was left out are on their own lines in square brackets.
"""

from __future__ import annotations

from toolwire.tools.workspace.outputs import (
    CreateResult,
    EditResult,
    ExecResult,
    FileList,
    FileView,
    GrepResult,
    PatchPreview,
    ReadResult,
)


def number_line(number: int, text: str) -> str:
    """One line as `cat -n` prints it: the number right-aligned to width 6, a TAB, the text."""
    return f"{number:>6}\t{text}"


def render_view(view: FileView) -> str:
    parts: list[str] = []
    for index, window in enumerate(view.windows):
        if index:
            parts.append("--")
        parts.extend(number_line(window.start + i, line) for i, line in enumerate(window.lines))
    if view.note:
        parts.append(view.note)
    return "\n".join(parts)


def render_read(result: ReadResult) -> str:
    blocks = [
        f"==> {view.path} <==\n{render_view(view)}" if result.headers else render_view(view)
        for view in result.views
    ]
    if result.note:
        blocks.append(result.note)
    return "\n\n".join(blocks) if result.headers else "\n".join(blocks)


def render_find(result: FileList) -> str:
    if not result.paths:
        return f"[no files match {result.pattern} under {result.base}]"
    text = "\n".join(result.paths)
    if result.truncated:
        more = result.total - len(result.paths)
        text += f"\n[{more} more files not shown; narrow the pattern or the path]"
    return text


def render_grep(result: GrepResult) -> str:
    if not result.lines:
        return "[no matches]"
    out: list[str] = []
    previous = None
    for line in result.lines:
        if (
            result.context
            and previous is not None
            and (line.path != previous.path or line.line != previous.line + 1)
        ):
            out.append("--")
        mark = ":" if line.is_match else "-"
        out.append(f"{line.path}{mark}{line.line}{mark}{line.text}")
        previous = line
    if result.truncated:
        out.append(
            f"[stopped after {result.match_count} matches; more exist. "
            "Narrow the pattern, the path or the glob, or raise max_matches]"
        )
    return "\n".join(out)


def render_preview(preview: PatchPreview) -> str:
    return f"{preview.diff.rstrip(chr(10))}\n\npatchId: {preview.patch_id}"


def render_edit(result: EditResult) -> str:
    lines = [
        f"path: {result.path}",
        f"replacements: {result.replacements}",
        f"bytesWritten: {result.bytes_written}",
        f"sha256: {result.sha256}",
    ]
    if result.patch_id:
        lines.append(f"patchId: {result.patch_id}")
    return "\n".join(lines)


def render_create(result: CreateResult) -> str:
    return "\n".join(
        [
            f"path: {result.path}",
            f"created: {_flag(result.created)}",
            f"bytesWritten: {result.bytes_written}",
            f"sha256: {result.sha256}",
        ]
    )


def render_exec(result: ExecResult) -> str:
    exit_code = "none" if result.exit_code is None else str(result.exit_code)
    return (
        f"exitCode: {exit_code}\n"
        f"timedOut: {_flag(result.timed_out)}\n"
        f"stdoutTruncated: {_flag(result.stdout_truncated)}\n"
        f"stderrTruncated: {_flag(result.stderr_truncated)}\n\n"
        f"stdout:\n{result.stdout}\n\n"
        f"stderr:\n{result.stderr}"
    )


def _flag(value: bool) -> str:
    return "true" if value else "false"
