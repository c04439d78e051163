"""Workspace path safety: every path resolves inside the root, whatever its spelling; every
tool refuses escapes with a message the model can act on."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import Workspace, WorkspaceError, workspace_tools


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (root / "link_out").symlink_to(outside)
    (root / "secret_link.txt").symlink_to(outside / "secret.txt")
    (root / "link_in.py").symlink_to(root / "src" / "app.py")
    return root


def test_relative_paths_resolve_inside(tree: Path) -> None:
    ws = Workspace(tree)
    assert ws.resolve("src/app.py") == tree / "src" / "app.py"
    assert ws.resolve("src/../src/./app.py") == tree / "src" / "app.py"
    assert ws.resolve(".") == ws.root
    assert ws.resolve("") == ws.root
    assert ws.display(ws.resolve("src/app.py")) == "src/app.py"
    assert ws.display(ws.root) == "."


def test_absolute_path_inside_the_root_is_allowed(tree: Path) -> None:
    ws = Workspace(tree)
    assert ws.resolve(str(tree / "src" / "app.py")) == tree / "src" / "app.py"


def test_symlink_staying_inside_is_allowed(tree: Path) -> None:
    ws = Workspace(tree)
    assert ws.resolve("link_in.py") == tree / "src" / "app.py"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../outside/secret.txt", "uses '..' to leave the workspace root"),
        ("src/../../outside", "uses '..' to leave the workspace root"),
        ("..", "uses '..' to leave the workspace root"),
        ("/etc/passwd", "absolute path '/etc/passwd' is outside the workspace root"),
        ("link_out/secret.txt", "symlink that points outside the workspace root"),
        ("secret_link.txt", "symlink that points outside the workspace root"),
        ("link_out", "symlink that points outside the workspace root"),
        ("src/app.py\x00.txt", "contains a NUL byte"),
    ],
)
def test_escapes_are_refused_with_actionable_messages(tree: Path, path: str, words: str) -> None:
    ws = Workspace(tree)
    with pytest.raises(WorkspaceError) as caught:
        ws.resolve(path)
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_absolute_path_escaping_through_dotdot_is_refused(tree: Path) -> None:
    ws = Workspace(tree)
    with pytest.raises(WorkspaceError, match="outside the workspace root"):
        ws.resolve(str(tree / ".." / "outside" / "secret.txt"))


def test_symlink_loop_is_an_error_not_a_crash(tree: Path) -> None:
    (tree / "loop_a").symlink_to(tree / "loop_b")
    (tree / "loop_b").symlink_to(tree / "loop_a")
    with pytest.raises(WorkspaceError):
        Workspace(tree).resolve("loop_a/x")


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace(tmp_path / "missing")


async def _call(ws: Workspace, name: str, **arguments: Any) -> str:
    tools = {t.name: t for t in workspace_tools(ws)}
    tool = tools[name]
    return tool.render(await tool.run(tool.validate(arguments)))


ESCAPING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("read_file", {"path": "secret_link.txt"}),
    ("find", {"pattern": "*", "path": "link_out"}),
    ("grep", {"pattern": "secret", "path": "/etc"}),
    ("search_files", {"pattern": "secret", "glob": "*", "path": ".."}),
    ("preview_edit", {"path": "secret_link.txt", "old": "secret", "new": "x"}),
    ("edit_file", {"path": "link_out/secret.txt", "old": "secret", "new": "x"}),
    ("create_file", {"path": "link_out/new.txt", "content": "x"}),
    ("create_file", {"path": "../new.txt", "content": "x"}),
    ("exec", {"command": "pwd", "cwd": "link_out"}),
    ("pipe", {"steps": [{"tool": "read_file", "args": {"path": "../outside/secret.txt"}}]}),
]


@pytest.mark.parametrize(("name", "arguments"), ESCAPING_CALLS)
async def test_every_tool_refuses_escapes(tree: Path, name: str, arguments: dict[str, Any]) -> None:
    ws = Workspace(tree, allow_write=True, allow_exec=True)
    with pytest.raises(WorkspaceError, match=r"outside the workspace root|leave the workspace"):
        await _call(ws, name, **arguments)
    assert (tree.parent / "outside" / "secret.txt").read_text() == "secret\n"
    assert sorted(os.listdir(tree.parent / "outside")) == ["secret.txt"]
    assert not (tree.parent / "new.txt").exists()
