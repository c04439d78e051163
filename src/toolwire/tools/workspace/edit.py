"""`preview_edit`, `edit_file`, `create_file`: exact-text edits, applied atomically and never
over a change they did not see.

An edit replaces `old` with `new` where `old` occurs exactly once (0 or several matches are
errors that say how to fix the call). `preview_edit` shows the diff and remembers the result
with the file's hash; `edit_file(patch_id=...)` applies it only if the file still has that
hash. Writes to one file are serialised by a per-path lock, and the hash is compared again
right before the atomic rename, so of two racing edits either both land in turn or the
loser fails cleanly.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from toolwire.tools.workspace.atomic import ABSENT, atomic_write, sha256_hex
from toolwire.tools.workspace.beneath import read_bytes
from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.errors import EditConflictError, WorkspaceError
from toolwire.tools.workspace.outputs import CreateResult, EditResult, PatchPreview
from toolwire.tools.workspace.rendering import render_create, render_edit, render_preview
from toolwire.tools.workspace.workspace import Patch, Workspace

_OLD = "Exact text to replace, whitespace included; it must occur exactly once in the file."


class PreviewEditArguments(StrictArguments):
    path: str = Field(description="File to edit, relative to the workspace root.")
    old: str = Field(description=_OLD)
    new: str = Field(description="Text to put in its place.")


class EditFileArguments(StrictArguments):
    patch_id: str | None = Field(None, description="A patchId from preview_edit to apply.")
    path: str | None = Field(None, description="File to edit (without patch_id).")
    old: str | None = Field(None, description=_OLD + " (without patch_id)")
    new: str | None = Field(None, description="Text to put in its place (without patch_id).")


class CreateFileArguments(StrictArguments):
    path: str = Field(description="File to create, relative to the workspace root.")
    content: str = Field(description="The whole content of the file.")
    overwrite: bool = Field(False, description="Replace the file if it exists.")


@dataclass(slots=True, frozen=True)
class Replacement:
    """A planned edit: the file's bytes and hash as read, and its bytes after the edit."""

    path: Path
    display: str
    base: bytes
    base_sha256: str
    result: bytes


def plan_replacement(workspace: Workspace, given: str, old: str, new: str) -> Replacement:
    """Read `given` and replace its one occurrence of `old` by `new` (in memory)."""
    path = workspace.resolve(given)
    display = workspace.display(path)
    if not old:
        raise WorkspaceError("old is empty; give the exact text to replace (or use create_file)")
    if old == new:
        raise WorkspaceError("old and new are the same text; there is nothing to change")
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not an existing file"
        raise WorkspaceError(f"{display} is {what}; edit_file changes existing files")
    try:
        base = read_bytes(workspace.root, path, display=display)
    except FileNotFoundError:
        raise WorkspaceError(f"{display} was deleted meanwhile; nothing was changed") from None
    try:
        text = base.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError(
            f"{display} is not UTF-8 text; only text files can be edited"
        ) from None
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        hint = (
            " It does occur with different surrounding whitespace: copy it exactly."
            if old.strip() and old.strip() in text
            else " read_file the region again and copy the text exactly, indentation included."
        )
        raise WorkspaceError(f"old text not found in {display}.{hint}")
    if count > 1:
        lines = _occurrence_lines(text, old)
        raise WorkspaceError(
            f"old text occurs {count} times in {display} (at lines {lines}); include more "
            "surrounding lines in old so that it matches exactly once"
        )
    result = text.replace(old, new, 1).encode("utf-8")
    return Replacement(path, display, base, sha256_hex(base), result)


def _occurrence_lines(text: str, old: str, limit: int = 10) -> str:
    lines: list[str] = []
    start = text.find(old)
    while start >= 0 and len(lines) < limit:
        lines.append(str(text.count("\n", 0, start) + 1))
        start = text.find(old, start + len(old))
    return ", ".join(lines) + (", …" if text.count(old) > limit else "")


def unified_diff(display: str, before: bytes, after: bytes) -> str:
    """A unified diff (3 lines of context) as plain text; `\\r` is not shown."""
    a = before.decode("utf-8", "replace").splitlines(keepends=True)
    b = after.decode("utf-8", "replace").splitlines(keepends=True)
    out: list[str] = []
    for line in difflib.unified_diff(a, b, f"a/{display}", f"b/{display}", n=3):
        if line.endswith("\n"):
            out.append(line.removesuffix("\n").removesuffix("\r"))
        else:
            out.append(line.removesuffix("\r"))
            out.append("\\ No newline at end of file")
    return "\n".join(out)


def _require_write(workspace: Workspace, tool: str) -> None:
    if not workspace.allow_write:
        raise WorkspaceError(f"{tool} is not allowed: this workspace is read-only")


class PreviewEdit(WorkspaceTool):
    name = "preview_edit"
    description = (
        "Show the unified diff replacing `old` (which must occur exactly once) by `new` would "
        "make, without writing. Ends with a `patchId:` line; pass that id to edit_file to apply "
        "exactly this change (refused if the file changed meanwhile)."
    )
    Arguments = PreviewEditArguments

    async def call(self, arguments: BaseModel, upstream: Any) -> PatchPreview:
        args = coerce(arguments, PreviewEditArguments)
        plan = await asyncio.to_thread(
            plan_replacement, self.workspace, args.path, args.old, args.new
        )
        digest = sha256_hex(f"{plan.display}\0{plan.base_sha256}\0".encode() + plan.result)
        patch = Patch(digest[:12], plan.path, plan.display, plan.base_sha256, plan.result)
        self.workspace.remember(patch)
        return PatchPreview(
            plan.display, patch.id, unified_diff(plan.display, plan.base, plan.result)
        )

    def render(self, output: Any) -> str:
        return render_preview(output)


class EditFile(WorkspaceTool):
    name = "edit_file"
    description = (
        "Edit a file: apply a preview_edit patch (`patch_id`), or replace `old` by `new` in "
        "`path` where `old` occurs exactly once. Atomic; fails instead of overwriting a change "
        "made since the file was read or previewed. Output: path, replacements, bytesWritten, "
        "sha256."
    )
    Arguments = EditFileArguments
    read_only = False

    async def call(self, arguments: BaseModel, upstream: Any) -> EditResult:
        args = coerce(arguments, EditFileArguments)
        _require_write(self.workspace, self.name)
        if args.patch_id is not None:
            if args.old is not None or args.new is not None:
                raise WorkspaceError("pass either patch_id, or path with old and new, not both")
            return await self._apply_patch(args.patch_id, args.path)
        if args.path is None or args.old is None or args.new is None:
            raise WorkspaceError(
                "edit_file needs patch_id (from preview_edit), or path, old and new together"
            )
        path = self.workspace.resolve(args.path)
        async with self.workspace.lock(path):
            plan = await asyncio.to_thread(
                plan_replacement, self.workspace, args.path, args.old, args.new
            )
            await asyncio.to_thread(
                atomic_write,
                self.workspace.root,
                plan.path,
                plan.result,
                expect_sha256=plan.base_sha256,
                display=plan.display,
            )
        return EditResult(plan.display, 1, len(plan.result), sha256_hex(plan.result))

    async def _apply_patch(self, patch_id: str, given: str | None) -> EditResult:
        patch = self.workspace.patch(patch_id)
        if given is not None and self.workspace.resolve(given) != patch.path:
            raise WorkspaceError(
                f"patchId {patch.id} is for {patch.display}, not {given}; drop path or fix it"
            )
        async with self.workspace.lock(patch.path):
            try:
                await asyncio.to_thread(
                    atomic_write,
                    self.workspace.root,
                    patch.path,
                    patch.new_content,
                    expect_sha256=patch.base_sha256,
                    display=patch.display,
                )
            except EditConflictError as exc:
                self.workspace.forget(patch.id)
                raise EditConflictError(
                    f"{exc} The preview (patchId {patch.id}) is void; run preview_edit again."
                ) from None
        self.workspace.forget(patch.id)
        content = patch.new_content
        return EditResult(patch.display, 1, len(content), sha256_hex(content), patch.id)

    def render(self, output: Any) -> str:
        return render_edit(output)


class CreateFile(WorkspaceTool):
    name = "create_file"
    description = (
        "Create a file with the given content (parent directories are created). Refuses to "
        "replace an existing file unless overwrite=true. Output: path, created, bytesWritten, "
        "sha256."
    )
    Arguments = CreateFileArguments
    read_only = False

    async def call(self, arguments: BaseModel, upstream: Any) -> CreateResult:
        args = coerce(arguments, CreateFileArguments)
        _require_write(self.workspace, self.name)
        path = self.workspace.resolve(args.path)
        display = self.workspace.display(path)
        data = args.content.encode("utf-8")
        async with self.workspace.lock(path):
            existed = await asyncio.to_thread(_prepare_create, path, display, args.overwrite)
            await asyncio.to_thread(
                atomic_write,
                self.workspace.root,
                path,
                data,
                expect_sha256=None if args.overwrite else ABSENT,
                display=display,
            )
        return CreateResult(display, not existed, len(data), sha256_hex(data))

    def render(self, output: Any) -> str:
        return render_create(output)


def _prepare_create(path: Path, display: str, overwrite: bool) -> bool:
    """Check the target; True when the file exists. (`atomic_write` makes the parent
    directories, beneath the root without following symlinks.)"""
    if path.is_dir():
        raise WorkspaceError(f"{display} is a directory")
    existed = path.exists()
    if existed and not overwrite:
        raise WorkspaceError(
            f"{display} already exists; use edit_file to change it, or pass overwrite=true "
            "to replace it whole"
        )
    return existed
