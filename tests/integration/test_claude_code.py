"""The real Claude Code CLI (pinned, installed into .tools/ by .ci/install-claude-code) against a
real `toolwire serve` and a scripted chat-completions upstream with the quirks open servers
have: it must finish a read-edit-run task through the Anthropic door, with its own tools.

Claude Code runs headless (`claude -p`) with HOME in a temporary directory, its non-essential
traffic, telemetry and auto-updater off, and every request on loopback. As root it refuses
`--dangerously-skip-permissions`; `--allowedTools` grants the tools the task needs instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Gateway, running_gateway
from toolwire.testing import Chunks, Reply

ROOT = Path(__file__).parents[2]
CLAUDE = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"

#: Every variable the run needs (docs/clients.md shows the same set).
ENVIRONMENT = {
    "ANTHROPIC_AUTH_TOKEN": "sk-toolwire-unused",
    "ANTHROPIC_MODEL": "sonnet",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}


def claude_binary() -> Path:
    if not CLAUDE.exists():
        if shutil.which("npm") is None:
            pytest.skip("the Claude Code tests need npm to install @anthropic-ai/claude-code")
        subprocess.run([str(ROOT / ".ci" / "install-claude-code")], check=True, timeout=300)
    if not CLAUDE.exists():
        pytest.skip("Claude Code could not be installed into .tools/claude-code")
    return CLAUDE


@pytest.fixture(scope="module")
def claude_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    claude_binary()
    os.environ["TOOLWIRE_LEAKED_CALLS"] = "salvage"  # leaked calls become real calls at once
    try:
        with running_gateway(tmp_path_factory.mktemp("db") / "toolwire.db") as running:
            yield running
    finally:
        os.environ.pop("TOOLWIRE_LEAKED_CALLS", None)


def run_claude(
    gateway: Gateway, home: Path, work: Path, prompt: str, tools: str
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": gateway.base_url.removesuffix("/v1"),
        **ENVIRONMENT,
    }
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [str(claude_binary()), "-p", prompt, "--allowedTools", tools],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def call_chunks(name: str, pieces: list[str], call_id: str, reasoning: str = "") -> Chunks:
    """A streamed call as quirky servers send it: the name repeated on every delta, the
    arguments cut mid-token; after `reasoning` (as `reasoning_content`), if any."""
    first = {"index": 0, "id": call_id, "type": "function", "function": {"name": name}}
    deltas = [first] + [
        {"index": 0, "function": {"name": name, "arguments": piece}} for piece in pieces
    ]
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": part}}]}
        for part in ([reasoning[: len(reasoning) // 2], reasoning[len(reasoning) // 2 :]])
        if reasoning
    ]
    chunks += [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [d]}}]}
        for d in deltas
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return Chunks(chunks)


def claude_requests(gateway: Gateway) -> list[dict[str, Any]]:
    return [r.body for r in gateway.upstream.chat_requests]


def test_claude_code_reads_edits_and_runs_through_quirks(
    claude_gateway: Gateway, tmp_path: Path
) -> None:
    gw = claude_gateway
    gw.reset()
    work = tmp_path / "work"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("status: draft\n")
    gw.upstream.add(
        # 1. Read, split oddly with the name repeated
        call_chunks(
            "Read", ['{"file_', f'path": "{notes}', '"}'], "call_read", "First read the file."
        ),
        # 2. Edit, leaked as Hermes <tool_call> text
        Reply(
            text="I will edit it.\n<tool_call>\n"
            f'{{"name": "Edit", "arguments": {{"file_path": "{notes}", '
            '"old_string": "draft", "new_string": "final"}}\n</tool_call>'
        ),
        # 3. Bash, leaked as Qwen3-Coder XML
        Reply(
            text="<tool_call>\n<function=Bash>\n<parameter=command>\ncat notes.txt\n"
            "</parameter>\n<parameter=description>\nShow the file\n</parameter>\n"
            "</function>\n</tool_call>"
        ),
        Reply(text="Done: notes.txt now says final."),
    )
    result = run_claude(gw, tmp_path / "home", work, "Set notes.txt to final.", "Read,Edit,Bash")
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"
    assert notes.read_text() == "status: final\n"
    assert "Done: notes.txt now says final." in result.stdout
    requests = claude_requests(gw)
    assert len(requests) == 4 and all(r["stream"] for r in requests)  # Claude Code streams
    calls = [
        call["function"]["name"]
        for m in requests[-1]["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls", [])
    ]
    assert calls == ["Read", "Edit", "Bash"]  # the two leaked calls came back as real ones
    # the thinking block Claude Code kept (signed here, text omitted) came back as reasoning
    first_turn = next(m for m in requests[1]["messages"] if m["role"] == "assistant")
    assert first_turn["reasoning_content"] == "First read the file."
    tool_results = [m for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_results[0]["tool_call_id"] == "call_read"
    assert any("status: final" in m["content"] for m in tool_results), tool_results
