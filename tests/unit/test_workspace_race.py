"""The writer and reader tools cannot be raced out of the workspace.

The attack: `exec` (or anything else sharing the workspace) flips a directory the tools are
using to a symlink pointing outside and back, in a tight loop, while `create_file`,
`edit_file` and `read_file` run. A check-then-use implementation (resolve the name, then write
by name) lands files outside and reads secrets; the descriptor walk in `beneath.py` must not.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import CreateFile, EditFile, ReadFile, Workspace, WorkspaceError

ROUNDS = 150


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "doc.txt").write_text("inside old\n")
    (outside / "doc.txt").write_text("SECRET old\n")
    return root, outside


@contextlib.contextmanager
def flipping(directory: Path, target: Path) -> Iterator[None]:
    """A thread swapping `directory` for a symlink to `target` and back until the block ends."""
    stop = threading.Event()
    parked = directory.with_name(directory.name + ".real")

    def flip() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                os.rename(directory, parked)
                os.symlink(target, directory)
                os.unlink(directory)
                os.rename(parked, directory)

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if directory.is_symlink():
            directory.unlink()


async def attempt(tool: Any, **arguments: Any) -> Any:
    try:
        return await tool.run(tool.validate(arguments))
    except (WorkspaceError, OSError):
        return None  # refused or lost the race: fine, as long as nothing went outside


async def test_writes_never_land_outside_while_a_directory_flips(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    ws = Workspace(root, allow_write=True)
    create, edit = CreateFile(ws), EditFile(ws)
    with flipping(root / "sub", outside):
        for i in range(ROUNDS):
            await attempt(create, path=f"sub/new{i}.txt", content="x", overwrite=True)
            await attempt(create, path=f"sub/deep{i}/f.txt", content="x")
            await attempt(edit, path="sub/doc.txt", old="old", new="new")
            await attempt(edit, path="sub/doc.txt", old="new", new="old")
    assert sorted(p.name for p in outside.iterdir()) == ["doc.txt"]
    assert (outside / "doc.txt").read_text() == "SECRET old\n"
    written = list(root.glob("sub*/new*.txt"))  # a create may have remade sub/ mid-flip
    assert written, "no write succeeded at all: the test proves nothing"


async def test_reads_never_see_outside_while_a_directory_flips(
    layout: tuple[Path, Path],
) -> None:
    root, outside = layout
    read = ReadFile(Workspace(root))
    seen: list[str] = []
    with flipping(root / "sub", outside):
        for _ in range(ROUNDS * 20):  # until enough reads got through the flipping
            result = await attempt(read, path="sub/doc.txt")
            if result is not None:
                seen.append(read.render(result))
                if len(seen) >= ROUNDS // 5:
                    break
    assert seen, "no read succeeded at all: the test proves nothing"
    assert not [text for text in seen if "SECRET" in text]
