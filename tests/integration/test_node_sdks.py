"""The Vercel AI SDK's default provider (`ai` + `@ai-sdk/openai`: the Responses API, store on,
earlier turns replayed as `item_reference`s) and the `openai` Node SDK's `responses.stream()`,
as they ship (pinned, installed into .tools/aisdk by .ci/install-aisdk), against a real
`toolwire serve` whose upstream thinks like DeepSeek: reasoning on every turn, and a 400 for a
tool-call turn sent back without its reasoning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Gateway
from tests.thinking_upstream import ThinkingUpstream
from toolwire.testing import Reply

ROOT = Path(__file__).parents[2]
TOOLS = ROOT / ".tools" / "aisdk"
SCRIPT = Path(__file__).parent / "node" / "sdk_scenarios.mjs"


def node_sdks() -> Path:
    if not (TOOLS / "node_modules" / "ai").exists():
        if shutil.which("npm") is None or shutil.which("node") is None:
            pytest.skip("the AI SDK and openai-node tests need node and npm (not found)")
        subprocess.run([str(ROOT / ".ci" / "install-aisdk")], check=True, timeout=300)
    if not (TOOLS / "node_modules" / "ai").exists():
        pytest.skip("the AI SDK could not be installed into .tools/aisdk")
    return TOOLS


def run_scenario(gateway: Gateway, scenario: str) -> dict[str, Any]:
    """The scenario's JSON result; a client error fails the test with its message."""
    result = subprocess.run(
        ["node", "--input-type=module"],
        input=SCRIPT.read_text(),
        cwd=node_sdks(),
        env={**os.environ, "TOOLWIRE_BASE_URL": gateway.base_url, "SCENARIO": scenario},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def thinking_turns() -> ThinkingUpstream:
    return ThinkingUpstream(
        [
            Reply(
                reasoning="Paris: ask the tool.",
                tool_calls=[("lookup", {"city": "Paris"})],
                call_ids=["call_paris"],
            ),
            Reply(text="Sunny in Paris.", reasoning="The tool said sunny."),
            Reply(
                reasoning="Rome: ask the tool.",
                tool_calls=[("lookup", {"city": "Rome"})],
                call_ids=["call_rome"],
            ),
            Reply(text="Warm in Rome.", reasoning="The tool said warm."),
        ]
    )


@pytest.mark.parametrize(
    "scenario",
    ["aisdk-generate", "aisdk-stream", "aisdk-generate-reasoning", "aisdk-stream-reasoning"],
)
def test_the_ai_sdk_default_provider_runs_a_multi_turn_tool_conversation(
    gw: Gateway, scenario: str
) -> None:
    node_sdks()
    upstream = thinking_turns()
    gw.upstream.default = upstream
    try:
        answer = run_scenario(gw, scenario)
    finally:
        gw.upstream.default = None
    assert answer["texts"] == ["Sunny in Paris.", "Warm in Rome."]
    assert answer["steps"] == [2, 2]
    if scenario.endswith("-reasoning"):  # shown from the summary it asked for
        assert answer["reasoning"] == ["The tool said sunny.", "The tool said warm."]
    assert upstream.refused == 0
    # the SDK sent its history back as item references (the first answer and each step's
    # reasoning), resolved from what toolwire stored; every tool-call turn reached the
    # upstream with its reasoning (else it would have refused)
    last = gw.upstream.chat_requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "tool"]
    assert last[1]["content"] == "Sunny in Paris."
    assert last[1]["reasoning_content"] == "The tool said sunny."
    assert last[3]["reasoning_content"] == "Rome: ask the tool."


def test_the_openai_node_sdk_streams_a_reasoning_tool_round_trip(gw: Gateway) -> None:
    node_sdks()
    upstream = thinking_turns()
    gw.upstream.default = upstream
    try:
        answer = run_scenario(gw, "openai-stream")
    finally:
        gw.upstream.default = None
    assert answer["first"] == ["reasoning", "function_call"]
    assert answer["reasoning"] == answer["streamedReasoning"] == "Paris: ask the tool."
    assert answer["summary"] == "Paris: ask the tool."
    assert answer["text"] == "Sunny in Paris."
    assert upstream.refused == 0
