"""More agents as they ship from npm (pinned, installed into .tools/ by .ci/install-*), against
a real `toolwire serve` in front of a scripted chat-completions server with the quirks open
servers have: each must finish a read → edit → run task through toolwire whatever the quirks
(two reads in parallel, streamed split mid-token with the name on every delta, after
reasoning; an edit leaked as text; a command whose arguments come as an object), and a model
stuck leaking its calls as text must end with an error the user sees, never a silent "done".

Each agent runs headless with HOME in a temporary directory and every request on loopback:
pi-coding-agent (`pi -p`) with both of its providers for custom models (`openai-completions`:
the chat door; `anthropic-messages`: the Messages door); qwen-code (`qwen --yolo`, on the
Node 22 its install script puts beside it) with its `openai` and `anthropic` auth types; the
Cline CLI (`cline`, configured by `cline auth` with its OpenAI-compatible provider). The
gateway re-asks a leaked call (the default `leaked_calls: retry`, two retries), so a leak costs
one more model turn.

What each agent shows for a stuck leak (toolwire gives up after the retries: a 422 on the chat
door, an `invalid_request_error` on the Messages door) is asserted below (`Agent.gave_up`) and
listed in docs/clients.md. crush is not here: its npm package downloads its binary from GitHub
at install time, which these machines cannot reach (docs/clients.md).
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
from tests.integration.test_claude_code import parallel_call_chunks
from toolwire.testing import Reply

ROOT = Path(__file__).parents[2]
TOOLS = ROOT / ".tools"
HERMES = '<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'
#: toolwire's words when it gives up on a model that keeps writing its call as text.
GAVE_UP = "wrote its tool call as text"


CHAT, MESSAGES = "Chat Completions", "Anthropic Messages"
Configure = Callable[[Path, Path, str], tuple[list[str], dict[str, str]]]
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Agent:
    name: str
    """As docs/compatibility.md names it."""
    install: str
    """Its script in .ci/."""
    variable: str
    """The variable `make clients-latest` points at the newest release's binary."""
    default_binary: Path
    door: str
    configure: Configure
    """(the binary, HOME, the gateway's root URL) -> (the command line before the prompt, the
    variables it runs with beside PATH and HOME)."""
    read: Callable[[str], Call]
    edit: Callable[[str, str, str], Call]
    run: Callable[[str], Call]
    gave_up: tuple[str, ...]
    """What it shows when toolwire gives up on a stuck leak (each must appear)."""
    after: tuple[str, ...] = ()
    """A command (after the binary) to run once the agent is done: what it leaves running."""

    @property
    def binary(self) -> Path:
        return Path(os.environ.get(self.variable, self.default_binary))


def _pi(api: str) -> Configure:
    def configure(binary: Path, home: Path, root: str) -> tuple[list[str], dict[str, str]]:
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
        return [str(binary), "-p", "--model", "toolwire/scripted-model"], {}

    return configure


def _pi_agent(api: str, door: str, gave_up: tuple[str, ...]) -> Agent:
    return Agent(
        name="pi-coding-agent",
        install="install-pi",
        variable="TOOLWIRE_PI",
        default_binary=TOOLS / "pi" / "node_modules" / ".bin" / "pi",
        door=door,
        configure=_pi(api),
        read=lambda path: ("read", {"path": path}),
        edit=lambda path, old, new: (
            "edit",
            {"path": path, "edits": [{"oldText": old, "newText": new}]},
        ),
        run=lambda command: ("bash", {"command": command}),
        gave_up=gave_up,
    )


def _qwen(auth_type: str) -> Configure:
    """`~/.qwen/settings.json` as its docs set up a provider (the key in an env variable);
    background memory extraction off (it would add a model call after every task)."""

    def configure(binary: Path, home: Path, root: str) -> tuple[list[str], dict[str, str]]:
        base = root + "/v1" if auth_type == "openai" else root
        provider = {"id": "scripted-model", "baseUrl": base, "envKey": "TOOLWIRE_API_KEY"}
        settings = {
            "modelProviders": {auth_type: [provider]},
            "security": {"auth": {"selectedType": auth_type}},
            "model": {"name": "scripted-model"},
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "privacy": {"usageStatisticsEnabled": False},
        }
        (home / ".qwen").mkdir(parents=True, exist_ok=True)
        (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
        node_bin = binary.parent  # the Node 22 .ci/install-qwen-code installs beside it
        return [str(binary), "--yolo"], {
            "PATH": f"{node_bin}{os.pathsep}{os.environ['PATH']}",
            "TOOLWIRE_API_KEY": "sk-toolwire-unused",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        }

    return configure


def _qwen_agent(auth_type: str, door: str, gave_up: tuple[str, ...]) -> Agent:
    return Agent(
        name="qwen-code",
        install="install-qwen-code",
        variable="TOOLWIRE_QWEN_CODE",
        default_binary=TOOLS / "qwen-code" / "node_modules" / ".bin" / "qwen",
        door=door,
        configure=_qwen(auth_type),
        read=lambda path: ("read_file", {"file_path": path}),
        edit=lambda path, old, new: (
            "edit",
            {"file_path": path, "old_string": old, "new_string": new},
        ),
        run=lambda command: ("run_shell_command", {"command": command}),
        gave_up=gave_up,
    )


def _cline(binary: Path, home: Path, root: str) -> tuple[list[str], dict[str, str]]:
    """`cline auth` with its OpenAI-compatible provider, as its docs set one up."""
    auth = [str(binary), "auth", "-p", "openai", "-k", "sk-toolwire-unused"]
    auth += ["-m", "scripted-model", "-b", root + "/v1"]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1"}
    subprocess.run(auth, env=env, check=True, capture_output=True, timeout=60)
    return [str(binary)], {}


AGENTS = {
    # the chat door's 422 with toolwire's reason; the Messages door's error JSON with it
    "pi-openai-completions": _pi_agent("openai-completions", CHAT, (f"422 the model {GAVE_UP}",)),
    "pi-anthropic-messages": _pi_agent(
        "anthropic-messages", MESSAGES, ('"type":"invalid_request_error"', GAVE_UP)
    ),
    "qwen-openai": _qwen_agent("openai", CHAT, (f"[API Error: 422 the model {GAVE_UP}",)),
    "qwen-anthropic": _qwen_agent(
        "anthropic", MESSAGES, ("[API Error: ", '"type":"invalid_request_error"', GAVE_UP)
    ),
    "cline-openai": Agent(
        name="Cline CLI",
        install="install-cline",
        variable="TOOLWIRE_CLINE",
        default_binary=TOOLS / "cline" / "node_modules" / ".bin" / "cline",
        door=CHAT,
        configure=_cline,
        read=lambda path: ("read_files", {"files": [{"path": path}]}),
        edit=lambda path, old, new: ("editor", {"path": path, "old_text": old, "new_text": new}),
        run=lambda command: ("run_commands", {"commands": [command]}),
        gave_up=("error:", f"the model {GAVE_UP}"),
        # a run starts a hub daemon on loopback that outlives it: stopped, as the CLI stops it
        after=("hub", "stop"),
    ),
}


def binary_of(agent: Agent) -> Path:
    if not agent.binary.exists() and agent.variable not in os.environ:
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
    binary = binary_of(agent)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    command, env = agent.configure(binary, home, gateway.base_url.removesuffix("/v1"))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1", **env}
    try:
        return subprocess.run(
            [*command, prompt],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
    finally:
        if agent.after:
            subprocess.run([str(binary), *agent.after], cwd=work, env=env, timeout=60)


def _split(call: Call, call_id: str) -> tuple[str, list[str], str]:
    """A call's arguments cut in three, mid-token."""
    name, arguments = call
    text = json.dumps(arguments)
    third = max(1, len(text) // 3)
    return name, [text[:third], text[third : 2 * third], text[2 * third :]], call_id


def _params(*features: str) -> list[Any]:
    return [
        pytest.param(key, marks=pytest.mark.compat(agent.name, agent.door, *features), id=key)
        for key, agent in AGENTS.items()
    ]


@pytest.mark.parametrize(
    "key", _params("streaming", "tool use", "parallel calls", "leaks recovered", "thinking")
)
def test_agent_reads_edits_and_runs_through_quirks(
    agents_gateway: Gateway, tmp_path: Path, key: str
) -> None:
    agent, gw = AGENTS[key], agents_gateway
    gw.reset()
    work = tmp_path / "work"
    work.mkdir()
    notes, todo = work / "notes.txt", work / "todo.txt"
    notes.write_text("status: draft\n")
    todo.write_text("next: ship it\n")
    edit_name, edit_arguments = agent.edit(str(notes), "draft", "final")
    run_name, run_arguments = agent.run("cat notes.txt")
    gw.upstream.add(
        # 1. two reads in one turn, after reasoning, each split oddly with its name on every delta
        parallel_call_chunks(
            [
                _split(agent.read(str(notes)), "call_notes"),
                _split(agent.read(str(todo)), "call_todo"),
            ],
            "Read both first.",
        ),
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
    # the reasoning stayed reasoning: never replayed to the model as the turn's text
    (reads,) = [m for m in requests[1]["messages"] if m["role"] == "assistant"]
    assert "Read both first." not in json.dumps(reads.get("content")), reads
    # both parallel reads ran, each answered under its own call's id
    read = {m["tool_call_id"]: json.dumps(m["content"]) for m in tool_messages(requests[1])}
    assert "status: draft" in read["call_notes"] and "next: ship it" in read["call_todo"], read
    last = json.dumps(requests[-1]["messages"])
    assert "status: final" in last  # the command's output reached the model


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


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
    for words in agent.gave_up:  # toolwire's reason, as the agent shows it
        assert words in shown, shown
    assert "<tool_call>" not in result.stdout
    assert len(gw.upstream.chat_requests) == 3  # the call, then two re-asks: no more
