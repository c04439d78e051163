"""The real Claude Code CLI (pinned, installed into .tools/ by .ci/install-claude-code) against a
real `toolwire serve` and a scripted chat-completions upstream with the quirks open servers
have: it must finish a read-edit-run task through the Anthropic door, with its own tools.

Claude Code runs headless (`claude -p`) with HOME in a temporary directory, its non-essential
traffic, telemetry and auto-updater off, and every request on loopback, through a loopback
logger (`request_log.py`) that records what it sent. It runs in every configuration of issue
#36 (`claude_code_shapes.py`: the model unset, a tier, a full `claude-*` name, an upstream
model's own name, the `ANTHROPIC_DEFAULT_*` models, an API key instead of a token, thinking on
and off, gateway model discovery, a session that compacts): one whole task per distinct
request shape those configurations produce, and the logged shape of every one replayed. As root it refuses
`--dangerously-skip-permissions`; `--allowedTools` grants the tools the task needs instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration import claude_code_shapes as shapes
from tests.integration.conftest import Gateway, running_gateway, search_backend_config
from tests.integration.request_log import RequestLog
from toolwire.testing import Chunks, Reply

ROOT = Path(__file__).parents[2]
#: `make clients-latest` points this at the newest release (.tools/latest/claude-code).
CLAUDE = Path(
    os.environ.get(
        "TOOLWIRE_CLAUDE_CODE", ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
    )
)
LATEST = "TOOLWIRE_CLAUDE_CODE" in os.environ
STORED = shapes.load()
#: One real task per distinct request shape; every configuration's shape is replayed.
REPRESENTATIVES = shapes.distinct(STORED)


def claude_binary() -> Path:
    if not CLAUDE.exists() and not LATEST:
        if shutil.which("npm") is None:
            pytest.skip("the Claude Code tests need npm to install @anthropic-ai/claude-code")
        subprocess.run([str(ROOT / ".ci" / "install-claude-code")], check=True, timeout=300)
    if not CLAUDE.exists():
        pytest.skip("Claude Code could not be installed into .tools/claude-code")
    return CLAUDE


@dataclass
class ClaudeGateway:
    gateway: Gateway
    log: RequestLog
    """Between Claude Code and toolwire: what Claude Code sent, and the status it got."""


@pytest.fixture(scope="module")
def claude_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClaudeGateway]:
    """One gateway for the module, with a search backend (for Claude Code's WebSearch)."""
    claude_binary()
    root = tmp_path_factory.mktemp("claude")
    config = ("--config", str(search_backend_config(root)))
    os.environ["TOOLWIRE_LEAKED_CALLS"] = "salvage"  # leaked calls become real calls at once
    try:
        with (
            running_gateway(root / "toolwire.db", config) as running,
            RequestLog(running.base_url.removesuffix("/v1")).running() as log,
        ):
            yield ClaudeGateway(running, log)
    finally:
        os.environ.pop("TOOLWIRE_LEAKED_CALLS", None)


def run_claude(
    cg: ClaudeGateway,
    home: Path,
    work: Path,
    *args: str,
    variables: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": cg.log.base_url,
        **shapes.OFFLINE,
        **(variables if variables is not None else shapes.CONFIGURATIONS["tier-sonnet"]),
    }
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [str(claude_binary()), *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def call_chunks(name: str, pieces: list[str], call_id: str, reasoning: str = "") -> Chunks:
    """A streamed call as quirky servers send it: the name repeated on every delta, the
    arguments cut mid-token; after `reasoning` (as `reasoning_content`), if any."""
    return parallel_call_chunks([(name, pieces, call_id)], reasoning)


def parallel_call_chunks(calls: list[tuple[str, list[str], str]], reasoning: str = "") -> Chunks:
    """Calls made in parallel in one turn, streamed one after the other at their own index,
    each as `call_chunks` streams one."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": part}}]}
        for part in ([reasoning[: len(reasoning) // 2], reasoning[len(reasoning) // 2 :]])
        if reasoning
    ]
    for index, (name, pieces, call_id) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name}}
        deltas = [first] + [
            {"index": index, "function": {"name": name, "arguments": piece}} for piece in pieces
        ]
        chunks += [
            {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [d]}}]}
            for d in deltas
        ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return Chunks(chunks)


def claude_requests(gateway: Gateway) -> list[dict[str, Any]]:
    return [r.body for r in gateway.upstream.chat_requests]


def quirky_task(gateway: Gateway, notes: Path) -> None:
    """Two Reads in parallel (notes.txt and todo.txt beside it, each split oddly with the name
    repeated, after reasoning), Edit (leaked as Hermes `<tool_call>` text), Bash (leaked as
    Qwen3-Coder XML), then the answer."""
    todo = notes.with_name("todo.txt")
    todo.write_text("next: ship it\n")
    gateway.upstream.add(
        parallel_call_chunks(
            [
                ("Read", ['{"file_', f'path": "{notes}', '"}'], "call_read"),
                ("Read", ['{"file_path": "', f'{todo}"', "}"], "call_todo"),
            ],
            "First read the file.",
        ),
        Reply(
            text="I will edit it.\n<tool_call>\n"
            f'{{"name": "Edit", "arguments": {{"file_path": "{notes}", '
            '"old_string": "draft", "new_string": "final"}}\n</tool_call>'
        ),
        Reply(
            text="<tool_call>\n<function=Bash>\n<parameter=command>\ncat notes.txt\n"
            "</parameter>\n<parameter=description>\nShow the file\n</parameter>\n"
            "</function>\n</tool_call>"
        ),
        Reply(text="Done: notes.txt now says final."),
    )


def assert_finished(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-3000:]}"


FEATURES = ("streaming", "tool use", "parallel calls", "leaks recovered", "thinking")
DOOR = "Anthropic Messages"


@pytest.mark.parametrize(
    "configuration",
    [
        pytest.param(
            name,
            marks=pytest.mark.compat(
                "Claude Code", DOOR, *FEATURES, *(("compaction",) if name == "compaction" else ())
            ),
        )
        for name in REPRESENTATIVES
    ],
)
def test_claude_code_reads_edits_and_runs_through_quirks(
    claude_gateway: ClaudeGateway, tmp_path: Path, configuration: str
) -> None:
    """One configuration per distinct request shape (the others share its shape: see
    REPRESENTATIVES and the replay test below), each the whole task with the real binary."""
    cg, gw = claude_gateway, claude_gateway.gateway
    gw.reset()
    cg.log.clear()
    variables = shapes.CONFIGURATIONS[configuration]
    work = tmp_path / "work"
    work.mkdir()
    notes = work / "notes.txt"
    notes.write_text("status: draft\n")
    quirky_task(gw, notes)
    result = run_claude(
        cg,
        tmp_path / "home",
        work,
        "-p",
        "Set notes.txt to final.",
        "--allowedTools",
        "Read,Edit,Bash",
        variables=variables,
    )
    assert_finished(result)
    assert notes.read_text() == "status: final\n"
    assert "Done: notes.txt now says final." in result.stdout
    assert all(r.status == 200 for r in cg.log.requests), [
        (r.path, r.status) for r in cg.log.requests
    ]
    requests = claude_requests(gw)
    assert len(requests) == 4 and all(r["stream"] for r in requests)  # Claude Code streams
    calls = [
        call["function"]["name"]
        for m in requests[-1]["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls", [])
    ]
    assert calls == ["Read", "Read", "Edit", "Bash"]  # the two leaked calls came back as real ones
    tool_results = [m for m in requests[-1]["messages"] if m["role"] == "tool"]
    read = {m["tool_call_id"]: m["content"] for m in tool_results[:2]}  # both parallel reads ran
    assert "status: draft" in read["call_read"] and "next: ship it" in read["call_todo"], read
    assert any("status: final" in m["content"] for m in tool_results), tool_results
    thinking = next(r.body for r in cg.log.requests if r.path.startswith("/v1/messages"))
    first_turn = next(m for m in requests[1]["messages"] if m["role"] == "assistant")
    if (thinking.get("thinking") or {}).get("type") == "disabled":
        assert not first_turn.get("reasoning_content")  # not shown, so not kept
    else:  # the thinking block Claude Code kept (signed here) came back as reasoning
        assert first_turn["reasoning_content"] == "First read the file."
    if configuration == "model-discovery":
        (listing,) = [r for r in cg.log.requests if r.path.startswith("/v1/models")]
        assert listing.status == 200
    if configuration == "compaction":
        compact_and_go_on(cg, tmp_path, work, variables)
    logged = shapes.shapes_of(cg.log.requests)
    if not LATEST:  # the newest release reports its changes instead (make clients-latest)
        stored = STORED["configurations"][configuration]["shapes"]
        assert logged[0] == stored[0], shapes.diff(
            {"configurations": {configuration: {"shapes": stored}}},
            {"configurations": {configuration: {"shapes": logged}}},
        )


def compact_and_go_on(
    cg: ClaudeGateway, tmp_path: Path, work: Path, variables: dict[str, str]
) -> None:
    """`/compact` on the session just run (Claude Code's summary request goes through the
    door like any other), then the session goes on from the summary and runs a command."""
    gw = cg.gateway
    gw.reset()
    gw.upstream.add(
        Reply(
            text="<analysis>read, edited, ran</analysis>\n<summary>notes.txt says final</summary>"
        )
    )
    compacted = run_claude(cg, tmp_path / "home", work, "-c", "-p", "/compact", variables=variables)
    assert_finished(compacted)
    (summary_request,) = claude_requests(gw)
    assert "summary" in json.dumps(summary_request["messages"][-1]).lower()
    gw.reset()
    gw.upstream.add(
        Reply(tool_calls=[("Bash", {"command": "cat notes.txt", "description": "show"})]),
        Reply(text="After compaction: final."),
    )
    after = run_claude(
        cg,
        tmp_path / "home",
        work,
        "-c",
        "-p",
        "Show it again.",
        "--allowedTools",
        "Bash",
        variables=variables,
    )
    assert_finished(after)
    assert "After compaction: final." in after.stdout
    first = claude_requests(gw)[0]
    assert "notes.txt says final" in json.dumps(first["messages"])  # the summary went on
    assert "status: final" in json.dumps(claude_requests(gw)[1]["messages"])


@pytest.mark.parametrize("configuration", sorted(STORED["configurations"]))
def test_every_configurations_request_shape_is_served(
    claude_gateway: ClaudeGateway, configuration: str
) -> None:
    """The request each configuration made Claude Code send (logged: claude_code_shapes.json),
    laid over a logged request's messages and tools, is served: a streamed answer, no 4xx."""
    gw = claude_gateway.gateway
    gw.reset()
    logged = STORED["configurations"][configuration]["request"]
    base = json.loads(
        (ROOT / "tests" / "data" / "anthropic" / "claude_code_request.json").read_text()
    )
    body = {**base["body"], **logged["body"]}
    headers = {"authorization": "Bearer sk-toolwire-unused", **logged["headers"]}
    gw.upstream.add(Reply(text="served", reasoning="a thought"))
    answer = httpx.post(
        gw.base_url.removesuffix("/v1") + logged["path"], json=body, headers=headers, timeout=30
    )
    assert answer.status_code == 200, answer.text
    if body.get("stream"):
        events = [
            json.loads(line.removeprefix("data: "))
            for line in answer.text.splitlines()
            if line.startswith("data: ")
        ]
        text = "".join(e["delta"].get("text", "") for e in events if "delta" in e)
        assert events[-1]["type"] == "message_stop" and text == "served", answer.text
    else:
        assert answer.json()["content"][-1] == {"type": "text", "text": "served"}


@pytest.mark.compat("Claude Code", DOOR, "PDF")
def test_claude_code_reads_a_pdf_through_the_door(
    claude_gateway: ClaudeGateway, tmp_path: Path
) -> None:
    """Claude Code's Read sends a `.pdf` as a `document` block in the tool result: the model
    behind toolwire reads its text, page by page."""
    from tests.pdfs import make_pdf

    cg, gw = claude_gateway, claude_gateway.gateway
    gw.reset()
    work = tmp_path / "work"
    work.mkdir()
    invoice = work / "invoice.pdf"
    invoice.write_bytes(make_pdf(["Invoice 1042", "Total due: 310 EUR"]))
    gw.upstream.add(
        Reply(tool_calls=[("Read", {"file_path": str(invoice)})]),
        Reply(text="The total due is 310 EUR."),
    )
    result = run_claude(cg, tmp_path / "home", work, "-p", "What is due?", "--allowedTools", "Read")
    assert_finished(result)
    assert "310 EUR" in result.stdout
    second = claude_requests(gw)[1]
    read = json.dumps(second["messages"])
    assert "--- page 2 ---" in read and "Total due: 310 EUR" in read


@pytest.mark.compat("Claude Code", DOOR, "web search")
def test_claude_code_searches_the_web_through_the_operators_backend(
    claude_gateway: ClaudeGateway, tmp_path: Path
) -> None:
    """Claude Code's own WebSearch: a deferred tool the model loads with ToolSearch (whose
    answer is a `tool_reference`; the tool keeps `defer_loading`), then calls. Claude Code runs
    it as a second request with Anthropic's `web_search` server tool, which toolwire serves
    with the operator's search backend (an MCP server on loopback); the first model reads the
    pages found."""
    cg, gw = claude_gateway, claude_gateway.gateway
    gw.reset()
    cg.log.clear()
    work = tmp_path / "work"
    work.mkdir()
    gw.upstream.add(
        Reply(tool_calls=[("ToolSearch", {"query": "select:WebSearch", "max_results": 1})]),
        Reply(tool_calls=[("WebSearch", {"query": "toolwire gateway"})]),
        # Claude Code's search request: the model behind it searches, then sums up
        Reply(tool_calls=[("web_search", {"query": "toolwire gateway"})]),
        Reply(text="toolwire is an agent gateway."),
        Reply(text="toolwire is an agent gateway: [docs](https://toolwire.example/docs)"),
    )
    result = run_claude(
        cg, tmp_path / "home", work, "-p", "What is toolwire?", "--allowedTools", "WebSearch"
    )
    assert_finished(result)
    assert "[docs](https://toolwire.example/docs)" in result.stdout
    assert all(r.status == 200 for r in cg.log.requests), [
        (r.path, r.status) for r in cg.log.requests
    ]
    # the search went out as a request of its own, with the server tool, and was served
    (search,) = [r.body for r in cg.log.requests if len(r.body.get("tools", [])) == 1]
    assert search["tools"][0]["type"].startswith("web_search_")
    requests = claude_requests(gw)
    offered = [t["function"]["name"] for t in requests[1]["tools"]]
    assert "WebSearch" in offered  # loaded by the tool search, so offered
    backend = json.dumps(requests[3]["messages"])
    assert "https://toolwire.example/docs" in backend  # what the backend found
    (found,) = [m for m in requests[-1]["messages"] if m["role"] == "tool"][-1:]
    assert "https://toolwire.example/docs" in found["content"]  # the first model read it
