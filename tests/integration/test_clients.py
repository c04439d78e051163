"""Real clients as they ship, against a real `toolwire serve` and a scripted upstream.

The Codex CLI (pinned, installed into .tools/ by .ci/install-codex) runs `codex exec` with
its HOME and CODEX_HOME in a temporary directory whose config.toml holds only a provider block;
its network features are switched off on the command line, and everything stays on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.integration.conftest import Gateway, running_gateway, search_backend_config
from toolwire.testing import Body, Reply

ROOT = Path(__file__).parents[2]
#: `make clients-latest` points this at the newest release (.tools/latest/codex).
CODEX = Path(
    os.environ.get("TOOLWIRE_CODEX", ROOT / ".tools" / "codex" / "node_modules" / ".bin" / "codex")
)
PATCH = "*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch\n"

# Switched off: anything that would reach beyond loopback, and features that are not the subject.
OFFLINE = [
    "analytics.enabled=false",
    "check_for_update_on_startup=false",
    "features.apps=false",
    "features.plugins=false",
    "features.remote_plugin=false",
    "features.tool_suggest=false",
    "features.skill_search=false",
    "features.image_generation=false",
    "features.goals=false",
    "features.shell_snapshot=false",
    "features.computer_use=false",
    "features.browser_use=false",
    "features.in_app_browser=false",
]


def codex_binary() -> Path:
    if not CODEX.exists() and "TOOLWIRE_CODEX" not in os.environ:
        if shutil.which("npm") is None:
            pytest.skip("the Codex CLI tests need npm to install @openai/codex (not found)")
        subprocess.run([str(ROOT / ".ci" / "install-codex")], check=True, timeout=300)
    if not CODEX.exists():
        pytest.skip("the Codex CLI could not be installed into .tools/codex")
    return CODEX


@dataclass
class Codex:
    binary: Path
    home: Path
    work: Path
    gateway: Gateway

    def write_config(self, catalog: bool = False) -> None:
        base = self.gateway.base_url
        lines = [
            'model = "scripted-model"',
            'model_provider = "toolwire"',
            "[model_providers.toolwire]",
            'name = "toolwire"',
            f'base_url = "{base}"',
            'wire_api = "responses"',
            "request_max_retries = 0",
            "stream_max_retries = 0",
        ]
        (self.home / ".codex").mkdir(parents=True, exist_ok=True)
        (self.home / ".codex" / "config.toml").write_text("\n".join(lines) + "\n")
        self.catalog = catalog

    def run(self, *args: str, prompt: str, timeout: float = 40) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.home / ".codex"),
            "NO_COLOR": "1",
        }
        flags: list[str] = []
        for setting in OFFLINE:
            flags += ["-c", setting]
        if getattr(self, "catalog", False):
            flags += ["-c", f'model_catalog_json="{self.catalog_file()}"']
        command = [
            str(self.binary),
            "exec",
            *args,
            *flags,
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            prompt,
        ]
        return subprocess.run(
            command,
            env=env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def catalog_file(self) -> Path:
        """A model catalog declaring `apply_patch` as a freeform (`custom`) tool and images in."""
        path = self.home / "catalog.json"
        model = {
            "slug": "scripted-model",
            "display_name": "scripted-model",
            "description": "a scripted model behind toolwire",
            "priority": 1,
            "additional_speed_tiers": [],
            "service_tiers": [],
            "availability_nux": None,
            "upgrade": None,
            "default_reasoning_level": "medium",
            "supported_reasoning_levels": [{"effort": "medium", "description": "medium"}],
            "shell_type": "shell_command",
            "visibility": "list",
            "supported_in_api": True,
            "supports_reasoning_summaries": False,
            "support_verbosity": False,
            "apply_patch_tool_type": "freeform",
            "web_search_tool_type": "text",
            "supports_parallel_tool_calls": False,
            "supports_image_detail_original": False,
            "experimental_supported_tools": [],
            "supports_search_tool": False,
            "context_window": 100000,
            "max_context_window": 100000,
            "effective_context_window_percent": 95,
            "truncation_policy": {"mode": "tokens", "limit": 10000},
            "input_modalities": ["text", "image"],
            "base_instructions": "You are a coding agent.",
        }
        path.write_text(json.dumps({"models": [model]}))
        return path


@pytest.fixture(scope="module")
def codex_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One gateway for the module, with a search backend (for Codex's `web_search`)."""
    codex_binary()
    root = tmp_path_factory.mktemp("codex")
    config = ("--config", str(search_backend_config(root)))
    with running_gateway(root / "toolwire.db", config) as running:
        yield running


@pytest.fixture
def codex(codex_gateway: Gateway, tmp_path: Path) -> Codex:
    codex_gateway.reset()
    work = tmp_path / "work"
    work.mkdir()
    client = Codex(codex_binary(), tmp_path / "home", work, codex_gateway)
    client.write_config()
    return client


def requests_of(gateway: Gateway) -> list[dict[str, Any]]:
    return [r.body for r in gateway.upstream.chat_requests]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def assert_ran(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"


@pytest.mark.compat("Codex CLI", "OpenAI Responses", "plain", "streaming")
def test_codex_plain_answer_and_what_it_declares(codex: Codex) -> None:
    codex.gateway.upstream.add(Reply(text="hello from toolwire"))
    result = codex.run(prompt="say hello")
    assert_ran(result)
    assert "hello from toolwire" in result.stdout
    (request,) = requests_of(codex.gateway)
    names = {tool["function"]["name"] for tool in request["tools"]}
    # the sub-agent tools, declared as a namespace, reach the model under unambiguous names
    assert "multi_agent_v1__spawn_agent" in names and "exec_command" in names
    # web_search was declared: the operator's backend serves it (the model sees its tool)
    assert "search" in names and not any("web_search" in name for name in names)


@pytest.mark.compat("Codex CLI", "OpenAI Responses", "tool use", "parallel calls")
def test_codex_shell_command_and_a_second_turn(codex: Codex) -> None:
    """Two shell commands in one turn (in parallel), then a second `codex exec` session."""
    up = codex.gateway.upstream
    up.add(
        Reply(
            tool_calls=[
                ("exec_command", {"cmd": "echo shell-ran > out.txt && cat out.txt"}),
                ("exec_command", {"cmd": "echo also-ran > also.txt && cat also.txt"}),
            ]
        ),
        Reply(text="the command ran"),
    )
    assert_ran(codex.run(prompt="run a command"))
    assert (codex.work / "out.txt").read_text().strip() == "shell-ran"
    assert (codex.work / "also.txt").read_text().strip() == "also-ran"
    first, second = requests_of(codex.gateway)
    assert first["parallel_tool_calls"] is True  # as Codex asked
    outputs = [m["content"] for m in tool_messages(second)]
    assert "shell-ran" in outputs[0] and "also-ran" in outputs[1], outputs

    codex.gateway.reset()
    up.add(Reply(text="second turn answered"))
    result = codex.run("resume", "--last", prompt="and again")
    assert_ran(result)
    assert "second turn answered" in result.stdout
    (resumed,) = requests_of(codex.gateway)
    # the whole first turn came back as input items (store: false) and reached the model
    assert "shell-ran" in tool_messages(resumed)[0]["content"]
    assert resumed["messages"][-1]["content"] == "and again" or "and again" in json.dumps(
        resumed["messages"][-1]
    )


@pytest.mark.compat("Codex CLI", "OpenAI Responses", "web search")
def test_codex_web_search_runs_on_the_operators_backend(codex: Codex) -> None:
    """Codex declares `web_search`; the model's search runs on the gateway's backend (an MCP
    server on loopback) and reaches Codex as a `web_search_call`; the model reads the pages."""
    codex.gateway.upstream.add(
        Reply(tool_calls=[("search", {"query": "toolwire gateway"})]),
        Reply(text="toolwire is an agent gateway (https://toolwire.example/docs)."),
    )
    result = codex.run("--json", prompt="what is toolwire? search the web")
    assert_ran(result)
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    (search,) = [item for item in items if item.get("type") == "web_search"]
    assert search["query"] == "toolwire gateway", search
    assert items[-1]["text"] == "toolwire is an agent gateway (https://toolwire.example/docs)."
    second = requests_of(codex.gateway)[1]
    assert "https://toolwire.example/docs" in tool_messages(second)[0]["content"]


def test_codex_apply_patch_through_the_shell(codex: Codex) -> None:
    patch = PATCH.format(name="via_shell.txt", text="patched through the shell")
    codex.gateway.upstream.add(
        Reply(tool_calls=[("exec_command", {"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"})]),
        Reply(text="patched"),
    )
    assert_ran(codex.run(prompt="add a file"))
    assert (codex.work / "via_shell.txt").read_text() == "patched through the shell\n"


@pytest.mark.compat("Codex CLI", "OpenAI Responses", "tool use")
def test_codex_apply_patch_as_a_custom_tool(codex: Codex) -> None:
    codex.write_config(catalog=True)
    patch = PATCH.format(name="via_custom.txt", text="patched as a custom tool")
    codex.gateway.upstream.add(
        Reply(tool_calls=[("apply_patch", {"input": patch})]), Reply(text="patched")
    )
    assert_ran(codex.run(prompt="add a file"))
    assert (codex.work / "via_custom.txt").read_text() == "patched as a custom tool\n"
    first, second = requests_of(codex.gateway)
    (tool,) = [t for t in first["tools"] if t["function"]["name"] == "apply_patch"]
    assert tool["function"]["parameters"]["required"] == ["input"]
    assert "grammar" in tool["function"]["description"]  # the lark grammar, described
    assert tool_messages(second)  # the custom_tool_call_output reached the model


@pytest.mark.compat("Codex CLI", "OpenAI Responses", "images")
def test_codex_image_from_a_tool_reaches_the_model(codex: Codex) -> None:
    codex.write_config(catalog=True)
    image = codex.work / "dot.png"
    image.write_bytes(_png())
    codex.gateway.upstream.add(
        Reply(tool_calls=[("view_image", {"path": str(image)})]), Reply(text="a dot")
    )
    assert_ran(codex.run(prompt="look at dot.png"))
    second = requests_of(codex.gateway)[1]
    after = second["messages"][second["messages"].index(tool_messages(second)[-1]) + 1 :]
    parts = [p for m in after if isinstance(m["content"], list) for p in m["content"]]
    assert any(
        p["type"] == "image_url" and p["image_url"]["url"].startswith("data:image/png")
        for p in parts
    ), after


def test_codex_upstream_failure_is_reported(codex: Codex) -> None:
    codex.gateway.upstream.add(Body({"error": {"message": "model not loaded"}}, status=400))
    result = codex.run(prompt="say hello", timeout=30)
    assert result.returncode != 0
    assert "model not loaded" in result.stdout + result.stderr


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


# -- the OpenAI Agents SDK: HostedMCPTool with approvals, inline history (store: false) --------

from tests.integration.test_mcp import (  # noqa: E402  (fixtures: the demo MCP server, a gateway)
    calls_log,
    demo_tool,
    logged,
    mcp_gateway,
    mcp_url,
    mg,
)

_FIXTURES = (calls_log, mcp_gateway, mcp_url, mg)


@pytest.mark.parametrize("approve", [True, False])
async def test_agents_sdk_hosted_mcp_approval_inline_history(
    mg: Gateway, mcp_url: str, calls_log: Path, approve: bool
) -> None:
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    asked: list[str] = []

    def decide(request: Any) -> dict[str, Any]:
        asked.append(request.data.name)
        return {"approve": approve, "reason": "test"}

    client = openai.AsyncOpenAI(base_url=mg.base_url, api_key="sk-unused", max_retries=0)
    model = agents.OpenAIResponsesModel(model="m", openai_client=client)
    agent = agents.Agent(
        name="assistant",
        model=model,
        tools=[agents.HostedMCPTool(tool_config=demo_tool(mcp_url), on_approval_request=decide)],
        model_settings=agents.ModelSettings(store=False),
    )
    mg.upstream.add(
        Reply(tool_calls=[("delete_file", {"path": "old.txt"})]),
        Reply(text="Deleted." if approve else "Not deleted."),
    )
    result = await agents.Runner.run(agent, "delete old.txt")
    assert asked == ["delete_file"]
    assert result.final_output == ("Deleted." if approve else "Not deleted.")
    assert logged(calls_log) == (["delete_file old.txt"] if approve else [])
    # store: false throughout: every request carried the history inline
    second = mg.upstream.chat_requests[-1].body
    tool_results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1
    assert ("denied" in tool_results[0].lower()) is not approve


# -- opencode: the chat door through the AI SDK's OpenAI-compatible provider ------------------

#: `make clients-latest` points this at the newest release (.tools/latest/opencode).
OPENCODE = Path(
    os.environ.get(
        "TOOLWIRE_OPENCODE", ROOT / ".tools" / "opencode" / "node_modules" / ".bin" / "opencode"
    )
)


def opencode_binary() -> Path:
    if not OPENCODE.exists() and "TOOLWIRE_OPENCODE" not in os.environ:
        if shutil.which("npm") is None:
            pytest.skip("the opencode tests need npm to install opencode-ai (not found)")
        subprocess.run([str(ROOT / ".ci" / "install-opencode")], check=True, timeout=300)
    if not OPENCODE.exists():
        pytest.skip("opencode could not be installed into .tools/opencode")
    return OPENCODE


def run_opencode(gateway: Gateway, home: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    """`opencode run` in a fresh project whose opencode.json is the provider block of
    docs/clients.md (plus: no title call, so the script's turns are the agent's own; nothing
    that reaches beyond loopback)."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "toolwire": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "toolwire",
                "options": {"baseURL": gateway.base_url},
                "models": {"scripted-model": {"name": "scripted via toolwire"}},
            }
        },
        "agent": {"title": {"disable": True}},
        "autoupdate": False,
        "share": "disabled",
    }
    (work / "opencode.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "NO_COLOR": "1",
        "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",  # its background plugin install: loopback
        **{
            f"OPENCODE_DISABLE_{name}": "1"
            for name in ("MODELS_FETCH", "AUTOUPDATE", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE")
        },
    }
    command = [str(opencode_binary()), "run", "-m", "toolwire/scripted-model", prompt]
    return subprocess.run(
        command,
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.compat("opencode", "Chat Completions", "streaming", "tool use", "parallel calls")
def test_opencode_runs_a_tool_through_the_chat_door(gw: Gateway, tmp_path: Path) -> None:
    """Two bash calls in one turn (in parallel): both run, both results reach the model."""
    opencode_binary()
    gw.upstream.add(
        Reply(
            tool_calls=[
                ("bash", {"command": "echo ran > out.txt && cat out.txt", "description": "one"}),
                ("bash", {"command": "echo also > also.txt && cat also.txt", "description": "two"}),
            ]
        ),
        Reply(text="the command ran"),
    )
    result = run_opencode(gw, tmp_path, "write a file")
    assert_ran(result)
    assert "the command ran" in result.stdout
    assert (tmp_path / "work" / "out.txt").read_text().strip() == "ran"
    assert (tmp_path / "work" / "also.txt").read_text().strip() == "also"
    first, second = requests_of(gw)
    assert "bash" in {tool["function"]["name"] for tool in first["tools"]}
    outputs = [json.dumps(m["content"]) for m in tool_messages(second)]
    assert "ran" in outputs[0] and "also" in outputs[1], outputs  # both results reached it


def test_opencode_sees_an_upstream_failure(gw: Gateway, tmp_path: Path) -> None:
    opencode_binary()
    gw.upstream.add(Body({"error": {"message": "model not loaded"}}, status=400))
    result = run_opencode(gw, tmp_path, "say hello")
    assert "model not loaded" in result.stdout + result.stderr
    assert len(requests_of(gw)) == 1  # a 400 with x-should-retry: false is not retried


# -- Pydantic AI: both its OpenAI model classes, as docs/clients.md configures them ------------


@pytest.mark.parametrize("model_class", ["OpenAIResponsesModel", "OpenAIChatModel"])
async def test_pydantic_ai_agent_runs_its_function_tool(gw: Gateway, model_class: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models import openai as models
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=gw.base_url, api_key="sk-unused")
    agent = Agent(getattr(models, model_class)("scripted-model", provider=provider))
    asked: list[str] = []

    @agent.tool_plain
    def stock_price(symbol: str) -> str:
        """The price of a stock."""
        asked.append(symbol)
        return f"{symbol}: 42.5"

    gw.upstream.add(
        Reply(tool_calls=[("stock_price", {"symbol": "ACME"})]), Reply(text="ACME is at 42.5.")
    )
    result = await agent.run("What is ACME at?")
    assert result.output == "ACME is at 42.5."
    assert asked == ["ACME"]  # the tool ran in the caller's process, as Pydantic AI runs it
    first, second = requests_of(gw)
    assert [tool["function"]["name"] for tool in first["tools"]][-1] == "stock_price"
    assert "ACME: 42.5" in tool_messages(second)[0]["content"]
