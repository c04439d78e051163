"""A new user's first hour: start-up says what it serves and what is wrong with the upstream,
errors are one or two lines that say what to do, retries are visible (issue 30)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, output_so_far, toolwire_process
from toolwire.errors import UpstreamHTTPError
from toolwire.testing import Body, ScriptedUpstream
from toolwire.transcript import UserMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.chat_completions import ChatCompletionsUpstream
from toolwire.upstream.events import ModelEvent, UpstreamRetry


def toolwire(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **env},
    )


def output_of(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    return output_so_far(process)


def short(text: str) -> None:
    """One or two lines, no traceback."""
    assert "Traceback" not in text, text
    assert 1 <= len(text.strip().splitlines()) <= 2, text


# -- start-up ----------------------------------------------------------------------------------


def test_serve_prints_what_it_serves_and_warns_of_a_down_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLWIRE_MAX_RETRIES", "1")
    port = free_port()
    dead = f"http://127.0.0.1:{free_port()}/v1"
    db = f"sqlite:///{tmp_path / 'tw.db'}"
    with toolwire_process(
        "serve",
        "--upstream",
        dead,
        "--model",
        "my-model",
        "--port",
        str(port),
        "--db",
        db,
        health=f"http://127.0.0.1:{port}/health",
    ) as process:
        out = output_of(process)
        assert "does not answer now" in out and f"{dead}/models" in out
        assert f"toolwire serving on http://127.0.0.1:{port}/v1" in out
        assert f"upstream: {dead}" in out
        assert "model:    my-model" in out
        assert f"database: {db}" in out
        assert "keys:     off" in out
        assert f"http://127.0.0.1:{port}/ui" in out
        # the request fails, and its error names the URL tried and the retries made
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/responses", json={"input": "hi"}, timeout=30
        )
        assert answer.status_code == 502
        message = answer.json()["error"]["message"]
        assert f"{dead}/chat/completions" in message
        assert "2 attempts, 1 of them retries" in message
        exported = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        retried = [
            line
            for line in exported.splitlines()
            if line.startswith("toolwire_upstream_retries_total{") and 'cause="connection"' in line
        ]
        assert retried and retried[0].endswith(" 1.0"), exported


class _OnlyV1(BaseHTTPRequestHandler):
    """A model server that serves the OpenAI API under /v1 only, as vLLM and llama.cpp do."""

    def do_GET(self) -> None:
        found = self.path == "/v1/models"
        body = b'{"object": "list", "data": [{"id": "m"}]}' if found else b'{"detail": "Not Found"}'
        self.send_response(200 if found else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_serve_says_a_base_url_lacks_v1(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OnlyV1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    port = free_port()
    try:
        with toolwire_process(
            "serve",
            "--upstream",
            root,
            "--port",
            str(port),
            "--db",
            f"sqlite:///{tmp_path / 'a.db'}",
            health=f"http://127.0.0.1:{port}/health",
        ) as process:
            out = output_of(process)
    finally:
        server.shutdown()
        server.server_close()
    assert f"HTTP 404 for {root}/models" in out
    assert f"did you mean --upstream {root}/v1 ? (it answers)" in out


def test_serve_says_the_model_is_not_one_the_upstream_lists(
    scripted: ScriptedUpstream, tmp_path: Path
) -> None:
    port = free_port()
    with toolwire_process(
        "serve",
        "--upstream",
        scripted.base_url,
        "--model",
        "no-such-model",
        "--port",
        str(port),
        "--db",
        f"sqlite:///{tmp_path / 'a.db'}",
        health=f"http://127.0.0.1:{port}/health",
    ) as process:
        out = output_of(process)
    assert "model 'no-such-model' is not among those the upstream lists" in out


def test_a_port_in_use_is_refused_before_the_local_model_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        done = toolwire("serve", "--port", str(port), "--db", f"sqlite:///{tmp_path / 'a.db'}")
        took = time.monotonic() - started
    assert done.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    short(done.stderr)
    assert "local model" not in done.stderr and took < 30


def test_an_upstream_that_is_not_a_url_is_refused() -> None:
    done = toolwire("serve", "--upstream", "x")
    assert done.returncode == 2
    assert "--upstream 'x' is not an http(s) URL" in done.stderr
    short(done.stderr)


# -- errors in a line or two -------------------------------------------------------------------


def test_a_missing_database_directory_is_one_line_and_debug_shows_the_traceback() -> None:
    db = "sqlite:////nonexistent-toolwire-dir/toolwire.db"
    done = toolwire("serve", "--upstream", "http://127.0.0.1:9/v1", "--db", db)
    assert done.returncode == 2
    assert "directory /nonexistent-toolwire-dir does not exist" in done.stderr
    assert "mkdir -p" in done.stderr
    short(done.stderr)
    debug = toolwire("--debug", "keys", "list", "--db", db)
    assert "Traceback" in debug.stderr


def test_a_database_that_is_down_is_one_line() -> None:
    done = toolwire("keys", "list", "--db", f"postgresql://u:p@127.0.0.1:{free_port()}/x")
    assert done.returncode == 2
    assert "cannot connect to the database" in done.stderr
    short(done.stderr)


def test_scripted_upstream_bad_json_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text("[{oops", encoding="utf-8")
    done = toolwire("scripted-upstream", str(script))
    assert done.returncode == 2
    assert "not valid JSON" in done.stderr
    short(done.stderr)


def test_mcp_serve_on_a_missing_root_is_one_line(tmp_path: Path) -> None:
    done = toolwire("mcp-serve", "--root", str(tmp_path / "missing"))
    assert done.returncode != 0
    assert "missing" in done.stderr
    short(done.stderr)


def test_version_and_help_a_user_understands() -> None:
    version = toolwire("--version")
    assert version.returncode == 0 and version.stdout.startswith("toolwire ")
    helped = toolwire("serve", "--help")
    assert "leave it out to start the bundled local model" in " ".join(helped.stdout.split())
    assert "<bool>" not in helped.stdout
    assert "thin door" not in toolwire("--help").stdout


def test_run_finds_a_tool_module_in_the_current_directory(
    scripted: ScriptedUpstream, tmp_path: Path
) -> None:
    (tmp_path / "mytools.py").write_text(
        "def shout(text: str) -> str:\n    '''Upper-case the text.'''\n    return text.upper()\n",
        encoding="utf-8",
    )
    scripted.add(Body({"choices": [{"message": {"content": "done"}, "finish_reason": "stop"}]}))
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "toolwire"),
            "run",
            "hi",
            "--upstream",
            scripted.base_url,
            "--model",
            "m",
            "--tool",
            "mytools:shout",
            "--no-stream",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "done" in done.stdout


def test_run_trace_shows_the_retries_of_a_failed_call() -> None:
    done = toolwire("run", "hi", "--upstream", f"http://127.0.0.1:{free_port()}/v1", "--model", "m")
    assert done.returncode == 1
    assert "upstream retry 1 (connection)" in done.stdout
    assert "4 attempts, 3 of them retries" in done.stdout


# -- upstream errors name the URL and the fix --------------------------------------------------


@pytest.mark.parametrize("stream", [True, False])
async def test_a_404_names_the_url_and_suggests_v1(
    scripted: ScriptedUpstream, stream: bool
) -> None:
    scripted.add(Body({"detail": "Not Found"}, status=404))
    root = scripted.base_url.removesuffix("/v1")
    upstream = ChatCompletionsUpstream(root)
    try:
        with pytest.raises(UpstreamHTTPError) as info:
            async for _ in upstream.stream_turn(
                TurnRequest("m", [UserMessage("hi")], stream=stream)
            ):
                pass
    finally:
        await upstream.aclose()
    assert f"for {root}/chat/completions" in info.value.message
    assert f"did you mean {root}/v1?" in info.value.message


async def test_a_refused_key_names_the_url_and_the_flag(scripted: ScriptedUpstream) -> None:
    scripted.add(Body({"error": {"message": "bad key"}}, status=401))
    upstream = ChatCompletionsUpstream(scripted.base_url)
    try:
        with pytest.raises(UpstreamHTTPError) as info:
            async for _ in upstream.stream_turn(TurnRequest("m", [UserMessage("hi")])):
                pass
    finally:
        await upstream.aclose()
    assert f"at {scripted.base_url}/chat/completions" in info.value.message
    assert "--api-key-env" in info.value.message


@pytest.mark.parametrize("stream", [True, False])
async def test_retries_of_a_call_that_finally_fails_are_reported(
    scripted: ScriptedUpstream, stream: bool
) -> None:
    scripted.add(*[Body({"error": {"message": "busy"}}, status=503) for _ in range(3)])
    upstream = ChatCompletionsUpstream(
        scripted.base_url, max_retries=2, initial_backoff=0.01, max_backoff=0.02
    )
    seen: list[ModelEvent] = []
    try:
        with pytest.raises(UpstreamHTTPError) as info:
            async for event in upstream.stream_turn(
                TurnRequest("m", [UserMessage("hi")], stream=stream)
            ):
                seen.append(event)
    finally:
        await upstream.aclose()
    retries = [e for e in seen if isinstance(e, UpstreamRetry)]
    assert [r.attempt for r in retries] == [1, 2]
    assert "(after 3 attempts, 2 of them retries)" in info.value.message


def test_scripted_upstream_still_serves_a_valid_script(tmp_path: Path) -> None:
    script = tmp_path / "ok.json"
    script.write_text(json.dumps([{"reply": {"text": "hi"}}]), encoding="utf-8")
    port = free_port()
    with toolwire_process(
        "scripted-upstream",
        str(script),
        "--port",
        str(port),
        health=f"http://127.0.0.1:{port}/v1/models",
    ):
        pass


# -- a child's last words ----------------------------------------------------------------------


async def test_an_mcp_stdio_server_that_dies_at_start_shows_its_stderr() -> None:
    from toolwire.tools.mcp.connection import McpConnection, McpConnectionError, stdio_opener

    connection = McpConnection(
        "MCP server 'time'",
        stdio_opener(sys.executable, ["-m", "no_such_mcp_server_module"], None, None),
    )
    with pytest.raises(McpConnectionError) as info:
        await connection.start(handshake_seconds=30)
    message = str(info.value)
    assert message.startswith("MCP server 'time': ")
    assert "No module named no_such_mcp_server_module" in message


# -- what it logs ------------------------------------------------------------------------------


def test_websockets_are_logged_in_toolwires_format_and_refusals_labelled(
    scripted: ScriptedUpstream, tmp_path: Path
) -> None:
    from websockets.sync.client import connect

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with toolwire_process(
        "serve",
        "--upstream",
        scripted.base_url,
        "--port",
        str(port),
        "--db",
        f"sqlite:///{tmp_path / 'a.db'}",
        health=f"{base}/health",
    ) as process:
        with connect(f"ws://127.0.0.1:{port}/v1/responses"):
            pass
        refused = httpx.post(
            f"{base}/v1/responses", json={"input": "hi"}, headers={"origin": "https://evil.test"}
        )
        assert refused.status_code == 403
        missing_model = httpx.post(f"{base}/v1/responses", json={"input": "hi"})
        exported = httpx.get(f"{base}/metrics").text
        deadline = time.monotonic() + 10
        while "method=WEBSOCKET" not in output_of(process) and time.monotonic() < deadline:
            time.sleep(0.05)  # the log line is written by a thread, after the socket closes
        out = output_of(process)
    assert missing_model.status_code == 400
    assert "toolwire serve --model NAME" in missing_model.json()["error"]["message"]
    line = next(line for line in out.splitlines() if "method=WEBSOCKET" in line)
    assert "path=/v1/responses" in line and "status=101" in line and "request_id=req_" in line
    assert '"WebSocket /v1/responses"' not in out
    assert 'route="(refused)",status="403"' in exported


async def test_the_local_model_server_dying_at_start_shows_its_stderr(tmp_path: Path) -> None:
    from toolwire.errors import ConfigError
    from toolwire.upstream.local_llama import ManagedLlamaServer, local_extra_installed

    if not local_extra_installed():
        pytest.skip("needs the local extra (llama-cpp-python), which `make run` installs")
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a GGUF file at all")
    server = ManagedLlamaServer(bad, startup_timeout=120)
    try:
        with pytest.raises(ConfigError) as info:
            await server.start()
    finally:
        await server.stop()
    assert "exited at start-up" in info.value.message
    assert "its stderr ended with:" in info.value.message
