"""`toolwire serve` serves from a process that never imported what a SQLite chat server does
not use (server/handover.py, toolwire/lean_httpx.py, store/engine.py, config.py): each of
these modules is RSS the server would carry for its whole life.

Python's `-X importtime` is passed on to the server's interpreter, and every interpreter starts
its report with a header line: the last report is the server process's, from its start to its
end, a served chat request included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, wait_until_up
from toolwire.testing import Reply, ScriptedUpstream

NOT_IN_A_SERVER = (
    "typer",  # the CLI (click stays: uvicorn's package imports its own command line)
    "rich",  # the CLI's, and httpx's own command line's
    "pygments",
    "shellingham",
    "toolwire.cli",
    "yaml",  # a config file is read by the CLI
    "sqlalchemy.orm",  # SQLAlchemy's asyncio extension imports it: PostgreSQL's alone
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.postgresql",
    "aiohttp",  # the client for https:// upstreams (upstream/aiohttp_sender.py); this one is http
)
HEADER = "import time: self [us] | cumulative | imported package"


def imported(report: str) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in report.splitlines()
        if line.startswith("import time:") and line != HEADER
    }


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the hand-over is Linux's")
def test_a_served_chat_request_imports_neither_the_cli_nor_postgresql(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "stderr.txt"
    with ScriptedUpstream([Reply(text="It is 4 °C.")]) as upstream, log.open("wb") as out:
        args = ["--upstream", upstream.base_url, "--db", f"sqlite:///{tmp_path}/t.db"]
        args += ["--port", str(port)]
        process = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "toolwire", "serve", *args],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_until_up(f"http://127.0.0.1:{port}/health", process)
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "scripted-model", "messages": [{"role": "user", "content": "?"}]},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "It is 4 °C."
            # no `server: uvicorn` naming the stack to whoever asks; HTTP's own `date` stays
            assert "server" not in answer.headers and "date" in answer.headers
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(30) == 0
    reports = log.read_text().split(HEADER)
    assert len(reports) == 3, "the CLI's interpreter, then the server's (the same process)"
    cli, server = imported(reports[1]), imported(reports[2])
    assert {"typer", "toolwire.cli"} <= cli
    assert "toolwire.server.main" in server
    assert sorted(name for name in NOT_IN_A_SERVER if name in server) == []
    # `ps` still shows what the process runs: the CLI's own arguments end its command line
    assert cmdline[-8:-1] == [b"serve", *(a.encode() for a in args)]


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the hand-over is Linux's")
def test_the_server_process_runs_no_module_from_the_directory_it_was_started_in(
    tmp_path: Path,
) -> None:
    """The hand-over's interpreter imports `pickle` before it restores the CLI's search path:
    started where a `pickle.py` lies (a shared folder, a checked-out repository), the server
    must not run it. It also names itself `toolwire`, as the CLI's process was named."""
    marker = tmp_path / "ran"
    (tmp_path / "pickle.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    port = free_port()
    with ScriptedUpstream([]) as upstream:
        program = Path(sys.executable).parent / "toolwire"  # the console script, as users run it
        args = ["serve", "--upstream", upstream.base_url, "--port", str(port)]
        args += ["--db", f"sqlite:///{tmp_path}/t.db"]
        process = subprocess.Popen(
            [str(program), *args],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_up(f"http://127.0.0.1:{port}/health", process)
            name = Path(f"/proc/{process.pid}/comm").read_text().strip()
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(30) == 0
    assert not marker.exists()
    assert name == "toolwire"
