"""preview_edit, edit_file, create_file: exact rendering, exact-once matching, atomic writes,
and races that never lose a change."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import (
    CreateFile,
    EditConflictError,
    EditFile,
    EditResult,
    PatchPreview,
    PreviewEdit,
    Workspace,
    WorkspaceError,
    workspace_tools,
)
from toolwire.tools.workspace.atomic import ABSENT, atomic_write, sha256_hex


async def call(tool_type: type[Any], ws: Workspace, **arguments: Any) -> Any:
    tool = tool_type(ws)
    return await tool.run(tool.validate(arguments))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "app.py").write_text("def main():\n    return 1\n\n\nprint(main())\n")
    return Workspace(tmp_path, allow_write=True)


async def test_preview_renders_a_unified_diff_and_a_patch_id(ws: Workspace) -> None:
    preview = await call(PreviewEdit, ws, path="app.py", old="return 1", new="return 2")
    assert isinstance(preview, PatchPreview)
    assert len(preview.patch_id) == 12
    assert PreviewEdit(ws).render(preview) == (
        "--- a/app.py\n+++ b/app.py\n@@ -1,5 +1,5 @@\n def main():\n-    return 1\n"
        f"+    return 2\n \n \n print(main())\n\npatchId: {preview.patch_id}"
    )
    assert (ws.root / "app.py").read_text().count("return 1") == 1  # nothing written


async def test_preview_shows_backslashes_raw_and_marks_a_missing_final_newline(
    tmp_path: Path,
) -> None:
    (tmp_path / "re.ts").write_text("const RE = /\\.js$/;")
    ws = Workspace(tmp_path)
    preview = await call(PreviewEdit, ws, path="re.ts", old="\\.js$", new="\\.ts$")
    assert PreviewEdit(ws).render(preview) == (
        "--- a/re.ts\n+++ b/re.ts\n@@ -1 +1 @@\n-const RE = /\\.js$/;\n\\ No newline at end of file\n"
        f"+const RE = /\\.ts$/;\n\\ No newline at end of file\n\npatchId: {preview.patch_id}"
    )


async def test_edit_by_patch_id_applies_exactly_the_preview(ws: Workspace) -> None:
    preview = await call(PreviewEdit, ws, path="app.py", old="return 1", new="return 2")
    result = await call(EditFile, ws, patch_id=preview.patch_id)
    expected = b"def main():\n    return 2\n\n\nprint(main())\n"
    assert (ws.root / "app.py").read_bytes() == expected
    assert result == EditResult("app.py", 1, len(expected), sha(expected), preview.patch_id)
    assert EditFile(ws).render(result) == (
        f"path: app.py\nreplacements: 1\nbytesWritten: {len(expected)}\nsha256: {sha(expected)}\n"
        f"patchId: {preview.patch_id}"
    )
    with pytest.raises(WorkspaceError, match="unknown patchId"):  # single use
        await call(EditFile, ws, patch_id=preview.patch_id)


async def test_edit_by_old_and_new(ws: Workspace) -> None:
    result = await call(EditFile, ws, path="app.py", old="print(main())", new="main()")
    expected = b"def main():\n    return 1\n\n\nmain()\n"
    assert (ws.root / "app.py").read_bytes() == expected
    assert EditFile(ws).render(result) == (
        f"path: app.py\nreplacements: 1\nbytesWritten: {len(expected)}\nsha256: {sha(expected)}"
    )


async def test_old_must_match_exactly_once(ws: Workspace) -> None:
    (ws.root / "dup.py").write_text("x = 1\ny = 2\nx = 1\n")
    with pytest.raises(WorkspaceError, match=r"occurs 2 times in dup.py \(at lines 1, 3\)"):
        await call(EditFile, ws, path="dup.py", old="x = 1", new="x = 3")
    with pytest.raises(WorkspaceError, match=r"old text not found in dup\.py"):
        await call(EditFile, ws, path="dup.py", old="z = 1", new="z = 3")
    with pytest.raises(WorkspaceError, match="different surrounding whitespace"):
        await call(EditFile, ws, path="dup.py", old="y = 2 \n", new="y = 3")
    with pytest.raises(WorkspaceError, match="same text"):
        await call(EditFile, ws, path="dup.py", old="y = 2", new="y = 2")
    assert (ws.root / "dup.py").read_text() == "x = 1\ny = 2\nx = 1\n"


async def test_crlf_files_accept_lf_old_text_and_keep_crlf(tmp_path: Path) -> None:
    (tmp_path / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    ws = Workspace(tmp_path, allow_write=True)
    await call(EditFile, ws, path="win.txt", old="one\ntwo", new="one\n2")
    assert (tmp_path / "win.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


async def test_arguments_must_be_a_patch_or_a_replacement(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="needs patch_id"):
        await call(EditFile, ws, path="app.py", old="return 1")
    with pytest.raises(WorkspaceError, match="not both"):
        await call(EditFile, ws, patch_id="abc", old="a", new="b")


async def test_writes_are_refused_unless_allowed(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    ws = Workspace(tmp_path)
    names = {t.name for t in workspace_tools(ws)}
    assert "edit_file" not in names and "create_file" not in names and "preview_edit" in names
    with pytest.raises(WorkspaceError, match="read-only"):
        await call(EditFile, ws, path="a.txt", old="a", new="b")
    with pytest.raises(WorkspaceError, match="read-only"):
        await call(CreateFile, ws, path="b.txt", content="b")
    assert (tmp_path / "a.txt").read_text() == "a\n" and not (tmp_path / "b.txt").exists()


async def test_a_change_after_the_preview_voids_the_patch(ws: Workspace) -> None:
    preview = await call(PreviewEdit, ws, path="app.py", old="return 1", new="return 2")
    (ws.root / "app.py").write_text("def main():\n    return 1  # edited by someone\n")
    with pytest.raises(EditConflictError, match="changed since it was read") as caught:
        await call(EditFile, ws, patch_id=preview.patch_id)
    assert "run preview_edit again" in str(caught.value)
    assert (ws.root / "app.py").read_text() == "def main():\n    return 1  # edited by someone\n"
    assert sorted(os.listdir(ws.root)) == ["app.py"]  # no temp file left behind


async def test_two_concurrent_edits_of_different_parts_both_land(ws: Workspace) -> None:
    first = call(EditFile, ws, path="app.py", old="def main():", new="def main() -> int:")
    second = call(EditFile, ws, path="app.py", old="print(main())", new="raise SystemExit(main())")
    await asyncio.gather(first, second)
    assert (ws.root / "app.py").read_text() == (
        "def main() -> int:\n    return 1\n\n\nraise SystemExit(main())\n"
    )


async def test_two_concurrent_edits_of_the_same_text_exactly_one_wins(ws: Workspace) -> None:
    results = await asyncio.gather(
        call(EditFile, ws, path="app.py", old="return 1", new="return 2"),
        call(EditFile, ws, path="app.py", old="return 1", new="return 3"),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, EditResult)]
    lost = [r for r in results if isinstance(r, WorkspaceError)]
    assert len(won) == 1 and len(lost) == 1
    assert "not found" in str(lost[0])
    content = (ws.root / "app.py").read_text()
    assert ("return 2" in content) != ("return 3" in content)


async def test_two_concurrent_patches_on_one_base_exactly_one_applies(ws: Workspace) -> None:
    a = await call(PreviewEdit, ws, path="app.py", old="return 1", new="return 2")
    b = await call(PreviewEdit, ws, path="app.py", old="print(main())", new="main()")
    results = await asyncio.gather(
        call(EditFile, ws, patch_id=a.patch_id),
        call(EditFile, ws, patch_id=b.patch_id),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, EditResult)]
    lost = [r for r in results if isinstance(r, EditConflictError)]
    assert len(won) == 1 and len(lost) == 1
    content = (ws.root / "app.py").read_bytes()
    assert sha(content) == won[0].sha256


def test_atomic_write_checks_the_hash_right_before_replacing(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"v1")
    with pytest.raises(EditConflictError):
        atomic_write(tmp_path, path, b"v2", expect_sha256=sha256_hex(b"v0"), display="f.txt")
    with pytest.raises(EditConflictError, match="created by someone else"):
        atomic_write(tmp_path, path, b"v2", expect_sha256=ABSENT, display="f.txt")
    assert path.read_bytes() == b"v1" and sorted(os.listdir(tmp_path)) == ["f.txt"]
    atomic_write(tmp_path, path, b"v2", expect_sha256=sha256_hex(b"v1"), display="f.txt")
    assert path.read_bytes() == b"v2"


async def test_edits_keep_the_file_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho one\n")
    script.chmod(0o755)
    await call(EditFile, Workspace(tmp_path, allow_write=True), path="run.sh", old="one", new="two")
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert script.read_text() == "#!/bin/sh\necho two\n"


async def test_create_file(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, allow_write=True)
    content = "const RE = /\\.ts$/;\n"
    result = await call(CreateFile, ws, path="src/new/re.ts", content=content)
    data = content.encode()
    assert (tmp_path / "src" / "new" / "re.ts").read_bytes() == data
    assert CreateFile(ws).render(result) == (
        f"path: src/new/re.ts\ncreated: true\nbytesWritten: {len(data)}\nsha256: {sha(data)}"
    )
    with pytest.raises(WorkspaceError, match="already exists; use edit_file"):
        await call(CreateFile, ws, path="src/new/re.ts", content="x")
    again = await call(CreateFile, ws, path="src/new/re.ts", content="x", overwrite=True)
    assert CreateFile(ws).render(again).splitlines()[1] == "created: false"
    assert (tmp_path / "src" / "new" / "re.ts").read_text() == "x"
    with pytest.raises(WorkspaceError, match="is a directory"):
        await call(CreateFile, ws, path="src", content="x")
    with pytest.raises(WorkspaceError, match="a parent of it is a file"):
        await call(CreateFile, ws, path="src/new/re.ts/inner.txt", content="x")


async def test_concurrent_creates_exactly_one_wins(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, allow_write=True)
    results = await asyncio.gather(
        call(CreateFile, ws, path="one.txt", content="A"),
        call(CreateFile, ws, path="one.txt", content="B"),
        return_exceptions=True,
    )
    assert sum(isinstance(r, WorkspaceError) for r in results) == 1
    assert (tmp_path / "one.txt").read_text() in ("A", "B")
