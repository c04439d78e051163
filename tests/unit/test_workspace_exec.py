"""exec: registered only when allowed, approval by default, exact rendering, timeouts that
kill the whole process group, capped output."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import Exec, ExecResult, Workspace, WorkspaceError, workspace_tools
from toolwire.tools.workspace.shell import Capture


def real(path: Path) -> Path:
    return path.resolve()


def process_state(pid: int) -> str:
    """The state letter from /proc (R, S, Z, ...), or "gone"."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return "gone"
    return status.split("State:\t", 1)[1][0]


async def run(ws: Workspace, **arguments: Any) -> ExecResult:
    tool = Exec(ws)
    result = await tool.run(tool.validate(arguments))
    assert isinstance(result, ExecResult)
    return result


def test_exec_is_registered_only_when_allowed_and_needs_approval(tmp_path: Path) -> None:
    assert "exec" not in {t.name for t in workspace_tools(Workspace(tmp_path))}
    tools = {t.name: t for t in workspace_tools(Workspace(tmp_path, allow_exec=True))}
    assert tools["exec"].requires_approval({"command": "ls"})
    relaxed = workspace_tools(Workspace(tmp_path, allow_exec=True), exec_needs_approval=False)
    assert not {t.name: t for t in relaxed}["exec"].requires_approval({"command": "ls"})


async def test_exec_refused_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not allowed"):
        await run(Workspace(tmp_path), command="true")


async def test_exec_renders_exit_code_and_both_streams(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    ws = Workspace(tmp_path, allow_exec=True)
    result = await run(ws, command="pwd; printf 'a\\\\.ts$\\n' ; echo oops >&2; exit 3", cwd="sub")
    assert result.exit_code == 3 and result.cwd == "sub"
    assert Exec(ws).render(result) == (
        "exitCode: 3\ntimedOut: false\nstdoutTruncated: false\nstderrTruncated: false\n\n"
        f"stdout:\n{real(tmp_path / 'sub')}\na\\.ts$\n\n\nstderr:\noops\n"
    )


async def test_exec_timeout_kills_the_process_group(tmp_path: Path) -> None:
    # Unsandboxed, so the pid the command writes is one this process can look up (in the
    # sandbox it is a pid of the sandbox's own namespace; test_workspace_sandbox covers that).
    ws = Workspace(tmp_path, allow_exec=True, exec_sandbox="none")
    started = time.monotonic()
    result = await run(ws, command="sleep 60 & echo $! > child.pid; echo started; wait", timeout=2)
    assert time.monotonic() - started < 30  # generous: the point is "not 60 seconds"
    assert result.timed_out and result.exit_code == -9
    assert result.stdout == "started\n"
    # The background child held stdout open; exec only returned once that pipe closed, so the
    # child is gone (or a zombie waiting for init to reap it).
    assert process_state(int((tmp_path / "child.pid").read_text())) in ("gone", "Z")


async def test_exec_timeout_over_the_workspace_limit_is_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, allow_exec=True, max_exec_timeout=10)
    with pytest.raises(WorkspaceError, match="over this workspace's limit of 10s"):
        await run(ws, command="true", timeout=11)


async def test_exec_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, allow_exec=True)
    result = await run(ws, command="seq 1 100000", max_output_chars=1000)
    assert result.stdout_truncated and not result.stderr_truncated and result.exit_code == 0
    assert result.stdout.startswith("1\n2\n3\n")
    assert result.stdout.endswith("99999\n100000\n")
    assert "bytes cut from the middle …]" in result.stdout
    assert len(result.stdout) < 1100


def test_capture_keeps_everything_under_the_cap() -> None:
    capture = Capture(10)
    for chunk in (b"abc", b"defg", b"hij"):
        capture.feed(chunk)
    assert not capture.truncated and capture.text() == "abcdefghij"
    capture.feed(b"KLM")
    assert capture.truncated
    assert capture.text() == "abcde\n[… 3 bytes cut from the middle …]\nijKLM"
