"""The real Gemini CLI (pinned, installed into .tools/ by .ci/install-gemini-cli) against a real
`toolwire serve` and a scripted chat-completions upstream with the quirks open servers have: it
must finish a read-edit-run task through the Gemini door, streaming, with its own tools.

Gemini CLI runs headless (`gemini -p ... --yolo`: its tools approved) in a scratch directory,
with HOME in a temporary directory holding the settings docs/clients.md shows (usage
statistics, telemetry and updates off), `GOOGLE_GEMINI_BASE_URL` on loopback and a toolwire
key as `GEMINI_API_KEY`: nothing leaves the machine.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Gateway, running_gateway, search_backend_config
from tests.integration.test_claude_code import parallel_call_chunks
from toolwire.testing import Reply
from toolwire.testing.scripted import Turn

ROOT = Path(__file__).parents[2]
#: the pinned release, or the newest one `make clients-latest` installed (TOOLWIRE_GEMINI_CLI)
GEMINI = Path(
    os.environ.get(
        "TOOLWIRE_GEMINI_CLI", ROOT / ".tools" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
    )
)
LATEST = "TOOLWIRE_GEMINI_CLI" in os.environ

#: Gemini CLI's settings for a run that stays on loopback (docs/clients.md shows the same).
SETTINGS = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "ide": {"enabled": False},
}
#: Every variable the run needs beside the base URL and the key (docs/clients.md).
ENVIRONMENT = {
    "GEMINI_TELEMETRY_ENABLED": "false",
    "GEMINI_CLI_TRUST_WORKSPACE": "true",
    "NO_COLOR": "1",
}
#: What Gemini CLI's model router (a `generateContent` with a JSON schema) is answered.
ROUTED = '{"complexity_reasoning": "A simple edit.", "complexity_score": 10}'


def gemini_binary() -> Path:
    if not GEMINI.exists() and not LATEST:
        if shutil.which("npm") is None:
            pytest.skip("the Gemini CLI tests need npm to install @google/gemini-cli")
        subprocess.run([str(ROOT / ".ci" / "install-gemini-cli")], check=True, timeout=300)
    if not GEMINI.exists():
        pytest.skip("Gemini CLI could not be installed into .tools/gemini-cli")
    return GEMINI


class Script:
    """The upstream's answers: the task's turns to the agent's streamed requests, in order;
    the router's JSON to its side requests (not streamed), whenever they come."""

    def __init__(self) -> None:
        self.turns: collections.deque[Turn] = collections.deque()

    def __call__(self, body: Any) -> Turn:
        if isinstance(body, dict) and body.get("stream") and self.turns:
            return self.turns.popleft()
        return Reply(text=ROUTED)


@pytest.fixture(scope="module")
def gemini_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One gateway for the module, with a search backend (for Gemini CLI's web search)."""
    gemini_binary()
    root = tmp_path_factory.mktemp("gemini")
    config = ("--config", str(search_backend_config(root)))
    os.environ["TOOLWIRE_LEAKED_CALLS"] = "salvage"  # leaked calls become real calls at once
    try:
        with running_gateway(root / "toolwire.db", config) as running:
            yield running
    finally:
        os.environ.pop("TOOLWIRE_LEAKED_CALLS", None)


def run_gemini(
    gateway: Gateway, home: Path, work: Path, prompt: str
) -> subprocess.CompletedProcess[str]:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": gateway.base_url.removesuffix("/v1"),
        "GEMINI_API_KEY": "tw-unused",
        **ENVIRONMENT,
    }
    return subprocess.run(
        [str(gemini_binary()), "-p", prompt, "--yolo"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.compat(
    "Gemini CLI",
    "Gemini",
    "streaming",
    "tool use",
    "parallel calls",
    "leaks recovered",
    "thinking",
)
def test_gemini_cli_reads_edits_and_runs_through_quirks(
    gemini_gateway: Gateway, tmp_path: Path
) -> None:
    gw = gemini_gateway
    gw.reset()
    script = Script()
    gw.upstream.default = script
    work = tmp_path / "work"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("status: draft\n")
    (work / "todo.txt").write_text("next: ship it\n")
    script.turns.extend(
        [
            # 1. two read_file calls in one turn, each split oddly with the name repeated,
            # after some reasoning
            parallel_call_chunks(
                [
                    ("read_file", ['{"file_', 'path": "notes', '.txt"}'], "call_read"),
                    ("read_file", ['{"file_path"', ': "todo.txt"}'], "call_todo"),
                ],
                "First read the file.",
            ),
            # 2. replace, leaked as Hermes <tool_call> text
            Reply(
                text="I will edit it.\n<tool_call>\n"
                '{"name": "replace", "arguments": {"file_path": "notes.txt", '
                '"instruction": "Mark the notes final.", '
                '"old_string": "draft", "new_string": "final"}}\n</tool_call>'
            ),
            # 3. run_shell_command, leaked as Qwen3-Coder XML
            Reply(
                text="<tool_call>\n<function=run_shell_command>\n<parameter=command>\n"
                "cat notes.txt\n</parameter>\n<parameter=description>\nShow the file\n"
                "</parameter>\n</function>\n</tool_call>"
            ),
            Reply(text="Done: notes.txt now says final."),
        ]
    )
    try:
        result = run_gemini(gw, tmp_path / "home", work, "Set notes.txt to final.")
    finally:
        gw.upstream.default = None
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"
    assert notes.read_text() == "status: final\n"
    assert "Done: notes.txt now says final." in result.stdout
    assert not script.turns, "every scripted turn was asked for"
    agent = [r.body for r in gw.upstream.chat_requests if r.body.get("stream")]
    assert len(agent) == 4  # Gemini CLI streams (streamGenerateContent?alt=sse)
    last = agent[-1]["messages"]
    calls = [
        c["function"]["name"]
        for m in last
        if m["role"] == "assistant"
        for c in m.get("tool_calls", [])
    ]
    # both reads ran; the leaks came back as calls
    assert calls == ["read_file", "read_file", "replace", "run_shell_command"]
    first_turn = next(m for m in agent[1]["messages"] if m["role"] == "assistant")
    # the thoughtSignature Gemini CLI kept on the call (sealed here) came back as reasoning
    assert first_turn["reasoning_content"] == "First read the file."
    results = [m for m in last if m["role"] == "tool"]
    assert (
        results[0]["tool_call_id"].endswith("call_read")
        and "status: draft" in results[0]["content"]
    )
    assert results[1]["tool_call_id"].endswith("call_todo")
    assert "next: ship it" in results[1]["content"]  # the second read, answered in turn
    assert any("status: final" in m["content"] for m in results), results


@pytest.mark.compat("Gemini CLI", "Gemini", "web search")
def test_gemini_cli_searches_the_web_through_the_operators_backend(
    gemini_gateway: Gateway, tmp_path: Path
) -> None:
    """Gemini CLI's google_web_search runs as a request of its own asking for Google's
    `googleSearch`; toolwire serves it inside the loop with the operator's search backend (an
    MCP server on loopback), and the agent's model reads what was found."""
    gw = gemini_gateway
    gw.reset()
    script = Script()
    script.turns.extend(
        [
            Reply(tool_calls=[("google_web_search", {"query": "toolwire gateway"})]),
            Reply(text="toolwire is an agent gateway, its docs say."),
        ]
    )

    def answer(body: Any) -> Turn:
        names = [t["function"]["name"] for t in body.get("tools", [])]
        if "web_search" not in names:
            return script(body)
        # Gemini CLI's search request: the model behind it searches, then sums up
        if any(m["role"] == "tool" for m in body["messages"]):
            return Reply(text="toolwire is an agent gateway (https://toolwire.example/docs).")
        return Reply(tool_calls=[("web_search", {"query": "toolwire gateway"})])

    gw.upstream.default = answer
    work = tmp_path / "work"
    work.mkdir()
    try:
        result = run_gemini(gw, tmp_path / "home", work, "What is toolwire? Search the web.")
    finally:
        gw.upstream.default = None
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"
    assert "toolwire is an agent gateway, its docs say." in result.stdout
    assert not script.turns, "every scripted turn was asked for"
    requests = [r.body for r in gw.upstream.chat_requests]
    searched = [r for r in requests if any(m["role"] == "tool" for m in r["messages"])]
    backend, agent = searched[0], searched[-1]
    assert "https://toolwire.example/docs" in json.dumps(backend["messages"])  # it found this
    (found,) = [m["content"] for m in agent["messages"] if m["role"] == "tool"]
    assert "toolwire is an agent gateway (https://toolwire.example/docs)." in found
