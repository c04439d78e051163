"""More agents as they ship from npm (pinned, installed into .tools/ by .ci/install-*), against
a real `toolwire serve` in front of a scripted chat-completions server with the quirks open
servers have: each must finish a read → edit → run task through toolwire whatever the quirks,
and a model stuck leaking its calls as text must end with an error the user sees, never a
silent "done".

pi-coding-agent runs with both of its providers for custom models (`openai-completions`: the
chat door; `anthropic-messages`: the Messages door), headless (`pi -p`), with HOME in a
temporary directory and every request on loopback. The gateway re-asks a leaked call (the
default `leaked_calls: retry`, two retries), so a leak costs one more model turn.

What each agent shows for a stuck leak (toolwire gives up after the retries: a 422 on the chat
door, an `invalid_request_error` on the Messages door) is asserted below and listed in
docs/clients.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Gateway, running_gateway
from tests.integration.test_claude_code import call_chunks
from toolwire.testing import Reply

ROOT = Path(__file__).parents[2]
TOOLS = ROOT / ".tools"
HERMES = '<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


@dataclass(frozen=True)
class Agent:
    name: str
    """As docs/compatibility.md names it."""
    install: str
    """Its script in .ci/."""
    binary: Path
    door: str
    configure: Callable[[Path, str], tuple[list[str], dict[str, str]]]
    """(HOME, the gateway's root URL) -> (the command line before the prompt, its env)."""
    read: Callable[[str], tuple[str, dict[str, Any]]]
    edit: Callable[[str, str, str], tuple[str, dict[str, Any]]]
    run: Callable[[str], tuple[str, dict[str, Any]]]


def _pi(api: str) -> Callable[[Path, str], tuple[list[str], dict[str, str]]]:
    def configure(home: Path, root: str) -> tuple[list[str], dict[str, str]]:
        agent_dir = home / ".pi" / "agent"
        agent_dir.mkdir(parents=True, exist_ok=True)
        base = root + "/v1" if api == "openai-completions" else root
        provider = {
            "baseUrl": base,
            "api": api,
            "apiKey": "sk-toolwire-unused",
            "models": [{"id": "scripted-model"}],
        }
        (agent_dir / "models.json").write_text(json.dumps({"providers": {"toolwire": provider}}))
        binary = str(TOOLS / "pi" / "node_modules" / ".bin" / "pi")
        return [binary, "-p", "--model", "toolwire/scripted-model"], {}

    return configure


def _pi_agent(api: str, door: str) -> Agent:
    return Agent(
        name="pi-coding-agent",
        install="install-pi",
        binary=TOOLS / "pi" / "node_modules" / ".bin" / "pi",
        door=door,
        configure=_pi(api),
        read=lambda path: ("read", {"path": path}),
        edit=lambda path, old, new: (
            "edit",
            {"path": path, "edits": [{"oldText": old, "newText": new}]},
        ),
        run=lambda command: ("bash", {"command": command}),
    )


AGENTS = {
    "pi-openai-completions": _pi_agent("openai-completions", "Chat Completions"),
    "pi-anthropic-messages": _pi_agent("anthropic-messages", "Anthropic Messages"),
}


def binary_of(agent: Agent) -> Path:
    if not agent.binary.exists():
        if shutil.which("npm") is None:
            pytest.skip(f"the {agent.name} tests need npm to install it")
        subprocess.run([str(ROOT / ".ci" / agent.install)], check=True, timeout=600)
    if not agent.binary.exists():
        pytest.skip(f"{agent.name} could not be installed into .tools/")
    return agent.binary


@pytest.fixture(scope="module")
def agents_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("db") / "toolwire.db") as running:
        yield running


def run_agent(
    agent: Agent, gateway: Gateway, tmp_path: Path, prompt: str
) -> subprocess.CompletedProcess[str]:
    binary_of(agent)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    command, env = agent.configure(home, gateway.base_url.removesuffix("/v1"))
    return subprocess.run(
        [*command, prompt],
        cwd=work,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1", **env},
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def _chunks_of(call: tuple[str, dict[str, Any]], call_id: str) -> Any:
    """A call split mid-token with its name repeated on every delta (call_chunks)."""
    name, arguments = call
    text = json.dumps(arguments)
    third = max(1, len(text) // 3)
    pieces = [text[:third], text[third : 2 * third], text[2 * third :]]
    return call_chunks(name, pieces, call_id, "Read it first.")


def _params(*features: str) -> list[Any]:
    return [
        pytest.param(key, marks=pytest.mark.compat(agent.name, agent.door, *features), id=key)
        for key, agent in AGENTS.items()
    ]


@pytest.mark.parametrize("key", _params("streaming", "tool use", "leaks recovered", "thinking"))
def test_agent_reads_edits_and_runs_through_quirks(
    agents_gateway: Gateway, tmp_path: Path, key: str
) -> None:
    agent, gw = AGENTS[key], agents_gateway
    gw.reset()
    work = tmp_path / "work"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("status: draft\n")
    edit_name, edit_arguments = agent.edit(str(notes), "draft", "final")
    run_name, run_arguments = agent.run("cat notes.txt")
    gw.upstream.add(
        # 1. the read, split oddly, the name on every delta, after reasoning
        _chunks_of(agent.read(str(notes)), "call_read"),
        # 2. the edit leaked as Hermes text: re-asked, then sent properly
        Reply(
            text="I will edit it.\n"
            + HERMES.format(name=edit_name, arguments=json.dumps(edit_arguments))
        ),
        Reply(tool_calls=[(edit_name, edit_arguments)]),
        # 3. the command with its arguments as an object, not a string
        Reply(tool_calls=[(run_name, run_arguments)]),
        Reply(text="Done: notes.txt now says final."),
    )
    result = run_agent(agent, gw, tmp_path, "Set notes.txt to final, then show it.")
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"
    assert notes.read_text() == "status: final\n"
    assert "Done: notes.txt now says final." in result.stdout
    assert "<tool_call>" not in result.stdout  # the leak was never shown
    requests = [r.body for r in gw.upstream.chat_requests]
    assert len(requests) == 5
    last = json.dumps(requests[-1]["messages"])
    assert "status: final" in last  # the command's output reached the model


@pytest.mark.parametrize("key", _params("leaks recovered"))
def test_a_stuck_leak_ends_with_an_error_the_user_sees(
    agents_gateway: Gateway, tmp_path: Path, key: str
) -> None:
    """The model writes its call as text on every try: toolwire gives up after its retries
    and says so; the agent must show that, and must not report success."""
    agent, gw = AGENTS[key], agents_gateway
    gw.reset()
    (tmp_path / "work").mkdir()
    name, arguments = agent.run("ls")
    leak = Reply(text=HERMES.format(name=name, arguments=json.dumps(arguments)))
    gw.upstream.add(leak, leak, leak)
    result = run_agent(agent, gw, tmp_path, "List the files.")
    shown = result.stdout + result.stderr
    assert result.returncode != 0, shown  # not a silent "done"
    assert "wrote its tool call as text" in shown, shown  # toolwire's reason, as pi shows it
    assert "<tool_call>" not in result.stdout
    assert len(gw.upstream.chat_requests) == 3  # the call, then two re-asks: no more
