"""End to end: a long session against the real local model (SmolLM2-135M under llama-cpp-python)
with a small context window goes on through automatic compaction (`context_management`), where
without it the transcript would outgrow the window and the upstream would refuse it.

Each turn is short (a one-line message, at most 16 output tokens: about 45 tokens of transcript)
and continues the previous one by `previous_response_id`. `TOOLWIRE_E2E_TURNS` sets the number
of turns: by default 36, which outgrow the 1,536-token window about one and a half times over
(two compactions); the issue's 50 take a few minutes on two busy cores."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.processes import free_port, toolwire_process

pytest.importorskip("llama_cpp", reason="needs the local extra: pip install 'toolwire[local]'")
pytestmark = pytest.mark.e2e

MODEL = "smollm2-135m-instruct"
N_CTX = 1536
THRESHOLD = 1000  # OpenAI's minimum compact_threshold
TURNS = int(os.environ.get("TOOLWIRE_E2E_TURNS", "36"))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    db: Path = tmp_path_factory.mktemp("long") / "toolwire.db"
    port = free_port()
    before = os.environ.get("TOOLWIRE_LOCAL_N_CTX")
    os.environ["TOOLWIRE_LOCAL_N_CTX"] = str(N_CTX)
    try:
        args = ["serve", "--db", f"sqlite:///{db}", "--port", str(port)]
        with toolwire_process(*args, health=f"http://127.0.0.1:{port}/health"):
            yield openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=300
            )
    finally:
        if before is None:
            os.environ.pop("TOOLWIRE_LOCAL_N_CTX", None)
        else:
            os.environ["TOOLWIRE_LOCAL_N_CTX"] = before


def test_a_long_session_in_a_small_window_completes_through_compaction(
    client: openai.OpenAI,
) -> None:
    started = time.monotonic()
    previous: str | None = None
    compactions = 0
    grown = 0  # tokens the transcript would hold uncompacted, about
    for turn in range(TURNS):
        message = (
            f"Turn {turn}: note that item {turn} costs {turn * 7 + 3} euros. Reply in a few words."
        )
        response = client.responses.create(
            model=MODEL,
            input=message,
            previous_response_id=previous,
            max_output_tokens=16,
            context_management=[{"type": "compaction", "compact_threshold": THRESHOLD}],
        )
        assert response.status != "failed", (turn, response.error)
        kinds = [item.type for item in response.output]
        compactions += kinds.count("compaction")
        if "compaction" in kinds:
            assert kinds.index("compaction") == 0, kinds  # compacted before the answer
            assert response.output[0].encrypted_content  # type: ignore[union-attr]
        assert response.usage is not None
        grown += len(message) // 4 + response.usage.output_tokens + 10  # 10: template, per turn
        previous = response.id
    elapsed = time.monotonic() - started
    print(f"{TURNS} turns, {compactions} compactions, ~{grown} tokens uncompacted, {elapsed:.1f} s")
    if grown > THRESHOLD:  # the uncompacted session passed the threshold
        assert compactions >= 1
    # The stored chain still goes on from its latest compaction.
    last = client.responses.create(
        model=MODEL, input="Hello again.", previous_response_id=previous, max_output_tokens=16
    )
    assert last.status != "failed", last.error
