"""exec in bubblewrap: no network, no writes outside the workspace, time and memory limits, no
root, a clean environment. Skipped (with the reason) where bwrap cannot run."""

from __future__ import annotations

import asyncio
import os
import shlex
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
    """A workspace belonging to an unprivileged user (as it should: as root, exec runs as the
    workspace's owner, or as nobody when root owns it)."""
    (tmp_path / "ws").mkdir()
    if os.geteuid() == 0:
        os.chown(tmp_path / "ws", sandbox_module.NOBODY, sandbox_module.NOBODY)
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
async def test_root_runs_commands_as_a_real_unprivileged_uid(root: Path, tmp_path: Path) -> None:
    """As root, the sandbox's uid must be a real host uid, not a user-namespace alias of 0: a
    file only root may read stays unreadable even when bind-mounted into the workspace's
    view, and a file the command creates belongs to the workspace's owner on the host."""
    (root / "root-only").write_text("ROOT SECRET")
    os.chmod(root / "root-only", 0o600)
    result = await run(
        Workspace(root, allow_exec=True),
        command="id -u; echo x > mine; cat root-only; grep CapEff /proc/self/status",
    )
    assert result.stdout.startswith(f"{sandbox_module.NOBODY}\n")
    assert (root / "mine").stat().st_uid == sandbox_module.NOBODY
    assert "ROOT SECRET" not in result.stdout and "Permission denied" in result.stderr
    assert "CapEff:\t0000000000000000" in result.stdout


@needs_bwrap
async def test_the_database_other_homes_and_shadow_are_out_of_sight(
    root: Path, tmp_path: Path
) -> None:
    """The attack: an approved exec reads toolwire's SQLite file (other tenants' responses,
    key hashes, the server secret) and /etc/shadow. Outside the workspace nothing but the
    system directories is mounted, and those are read as a real unprivileged uid."""
    db = tmp_path / "toolwire.db"
    db.write_text("TENANT SECRET")
    db.chmod(0o644)  # even a world-readable database is out of reach: it is not mounted
    result = await run(
        Workspace(root, allow_exec=True),
        command=f"cat {db}; cat /etc/shadow; ls /root /home /var /opt; cat ../toolwire.db",
    )
    assert "TENANT SECRET" not in result.stdout
    assert "root:" not in result.stdout  # /etc/shadow's first line
    assert result.stdout == "", result.stdout
    for hidden in ("/root", "/home", "/var"):
        assert f"cannot access '{hidden}': No such file or directory" in result.stderr


@needs_bwrap
async def test_no_host_unix_socket_is_reachable(root: Path) -> None:
    """The attack: "no network" covered TCP/UDP only; a Docker socket under /run stayed
    reachable. /run, /var/run and everything else outside the workspace are not mounted, and
    abstract sockets belong to the host's network namespace."""
    run_dir = Path("/run") if os.access("/run", os.W_OK) else Path(root).parent
    path = run_dir / f"toolwire-test-{os.getpid()}.sock"
    abstract = f"\0toolwire-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as hidden:
        server.bind(str(path))
        os.chmod(path, 0o777)
        server.listen()
        hidden.bind(abstract)
        hidden.listen()
        script = (
            "import socket\n"
            f"for a in ({str(path)!r}, {abstract!r}):\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n        s.connect(a); print('connected', repr(a))\n"
            "    except OSError as e:\n        print('refused', e.errno)\n"
        )
        try:
            open_result = await run(
                Workspace(root, allow_exec=True, exec_sandbox="none"),
                command=f"/usr/bin/python3 -c {shlex.quote(script)}",
            )
            result = await run(
                Workspace(root, allow_exec=True),
                command=f"/usr/bin/python3 -c {shlex.quote(script)}",
            )
        finally:
            path.unlink()
    assert open_result.stdout.count("connected") == 2  # the sockets do work unsandboxed
    assert "connected" not in result.stdout and result.stdout.count("refused") == 2


@needs_bwrap
async def test_tmp_is_bounded_by_the_memory_limit(root: Path) -> None:
    """The attack: 1 GiB written to the sandbox's tmpfs /tmp (RAM) with a 256 MB limit."""
    ws = Workspace(root, allow_exec=True, exec_memory_mb=32)
    result = await run(
        ws,
        command="dd if=/dev/zero of=/tmp/big bs=1M count=100 2>/dev/null; wc -c < /tmp/big; "
        "dd if=/dev/zero of=/dev/shm/big bs=1M count=100 2>/dev/null; wc -c < /dev/shm/big",
    )
    tmp, shm = (int(line) for line in result.stdout.split())
    assert 0 < tmp <= 32 * 1024 * 1024 and 0 < shm <= 32 * 1024 * 1024


@needs_bwrap
async def test_process_count_is_bounded(root: Path) -> None:
    """The attack: a fork bomb (here a bounded one: 300 sleeping children)."""
    ws = Workspace(root, allow_exec=True, exec_max_processes=40)
    result = await run(
        ws,
        command="n=0; while [ $n -lt 300 ]; do sleep 30.0713 & n=$((n+1)); done; echo all started",
        timeout=5,
    )
    assert "all started" not in result.stdout
    assert "fork" in result.stderr.lower()
    await asyncio.sleep(0.2)
    assert processes_with(b"30.0713") == []


@needs_bwrap
async def test_file_size_is_bounded(root: Path) -> None:
    """The attack: 1 GiB written into the workspace (here 64 MiB against an 8 MiB limit)."""
    ws = Workspace(root, allow_exec=True, exec_max_file_mb=8)
    result = await run(ws, command="dd if=/dev/zero of=big bs=1M count=64")
    assert (root / "big").stat().st_size <= 8 * 1024 * 1024
    assert result.exit_code != 0


@needs_bwrap
async def test_cpu_time_is_bounded_per_process(root: Path) -> None:
    """A spinning command gets SIGXCPU at its CPU limit (the wall clock covers sleepers)."""
    ws = Workspace(root, allow_exec=True, max_exec_timeout=600)
    result = await run(
        ws, command="grep -E 'Max (cpu time|processes|file size|data)' /proc/self/limits"
    )
    limits = {line[:25].strip(): line[25:].split()[0] for line in result.stdout.splitlines()}
    assert limits == {
        "Max cpu time": "31",
        "Max data size": str(4096 * 1024 * 1024),
        "Max file size": str(1024 * 1024 * 1024),
        "Max processes": "256",
    }


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
