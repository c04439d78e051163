"""exec in bubblewrap: no network, no writes outside the workspace, time and memory limits, no
root, a clean environment. Skipped (with the reason) where bwrap cannot run."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import Exec, ExecResult, Workspace, WorkspaceError
from toolwire.tools.workspace import sandbox as sandbox_module

SANDBOX = sandbox_module.detect("auto")
needs_bwrap = pytest.mark.skipif(
    not SANDBOX.active, reason=f"bwrap cannot run here: {SANDBOX.reason}"
)


async def run(ws: Workspace, **arguments: Any) -> ExecResult:
    tool = Exec(ws)
    result = await tool.run(tool.validate(arguments))
    assert isinstance(result, ExecResult)
    return result


def exists(path: str) -> bool:
    return Path(path).exists()


def processes_with(*markers: bytes) -> list[str]:
    """The pids whose command line holds one of `markers`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        if any(marker in text for marker in markers):
            found.append(cmdline.parent.name)
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port listening on this machine's loopback."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('connected')\""


@needs_bwrap
async def test_no_network_inside(root: Path, listener: int) -> None:
    open_ws = Workspace(root, allow_exec=True, exec_sandbox="none")
    assert (await run(open_ws, command=CONNECT.format(port=listener))).stdout == "connected\n"
    result = await run(Workspace(root, allow_exec=True), command=CONNECT.format(port=listener))
    assert result.exit_code != 0 and "connected" not in result.stdout
    assert "Connection refused" in result.stderr or "unreachable" in result.stderr


@needs_bwrap
async def test_writes_only_inside_the_workspace(root: Path) -> None:
    ws = Workspace(root, allow_exec=True)
    result = await run(
        ws,
        command="echo in > inside.txt; echo out > ../outside.txt; "
        "echo etc > /etc/toolwire-sandbox-test; echo home > ~/toolwire-sandbox-test; true",
    )
    assert (root / "inside.txt").read_text() == "in\n"
    assert not (root.parent / "outside.txt").exists()  # the private /tmp took it, then vanished
    assert not exists("/etc/toolwire-sandbox-test")
    assert "Read-only file system" in result.stderr


@needs_bwrap
async def test_time_limit_kills_the_whole_sandbox(root: Path) -> None:
    ws = Workspace(root, allow_exec=True)
    started = time.monotonic()
    result = await run(ws, command="sleep 61.25 & sleep 61.5 & wait", timeout=1)
    assert result.timed_out and time.monotonic() - started < 15
    await asyncio.sleep(0.2)
    assert processes_with(b"61.25", b"61.5") == []


@needs_bwrap
async def test_memory_limit(root: Path) -> None:
    ws = Workspace(root, allow_exec=True, exec_memory_mb=64)
    result = await run(ws, command="python3 -c 'bytearray(256 * 1024 * 1024)'")
    assert result.exit_code != 0 and "MemoryError" in result.stderr


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="toolwire is not running as root here")
async def test_root_runs_commands_as_nobody(root: Path) -> None:
    result = await run(Workspace(root, allow_exec=True), command="id -u; echo x > mine")
    assert result.stdout == f"{sandbox_module.NOBODY}\n" and (root / "mine").exists()


async def test_the_environment_is_clean_sandboxed_or_not(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_SECRET_KEY", "sk-secret")
    for mode in ("auto", "none"):
        ws = Workspace(root, allow_exec=True, exec_sandbox=mode)  # type: ignore[arg-type]
        result = await run(ws, command="echo ${UPSTREAM_SECRET_KEY:-unset}; echo $PATH")
        assert result.stdout.startswith("unset\n") and "/bin" in result.stdout


async def test_without_bwrap(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(WorkspaceError, match="bubblewrap"):
        Workspace(root, allow_exec=True, exec_sandbox="bwrap").check_sandbox()
    ws = Workspace(root, allow_exec=True)
    assert not ws.check_sandbox().active
    assert "NOT sandboxed (bubblewrap (bwrap) is not installed)" in Exec(ws).description
    assert (await run(ws, command="echo ok")).stdout == "ok\n"
