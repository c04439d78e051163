"""Google's official `google-genai` SDK against a real `toolwire serve` on loopback (with an API
key, sent as the SDK sends it: `x-goog-api-key`) and a scripted upstream: generate, stream with
function calling (and the result going back), count tokens, the model listing, and its typed
errors, also one that comes after the stream opened. The server's own log (uvicorn's access
log on) never holds a key given in the URL."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from tests.integration.test_claude_code import call_chunks
from tests.processes import free_port, output_so_far, toolwire_process
from toolwire.store.database import Store
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream

MODEL = "gemini-2.5-flash"
READ = types.FunctionDeclaration(
    name="read_file",
    description="Read a file",
    parameters_json_schema={
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
)


class Served:
    def __init__(self, upstream: ScriptedUpstream, base: str, key: str, process: Any) -> None:
        self.upstream = upstream
        self.base = base
        self.key = key
        self.process = process

    def client(self, key: str | None = None) -> genai.Client:
        return genai.Client(
            api_key=key or self.key,
            http_options=types.HttpOptions(
                base_url=self.base, retry_options=types.HttpRetryOptions(attempts=1)
            ),
        )


async def _create_key(db: Path) -> str:
    store = await Store.open(f"sqlite:///{db}")
    try:
        _, key = await store.keys.create("gemini-sdk")
        return str(key)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = tmp_path_factory.mktemp("db") / "toolwire.db"
    key = asyncio.run(_create_key(db))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # uvicorn's access log on: its lines print the query string
    env = {"TOOLWIRE_READ_TIMEOUT": "2", "TOOLWIRE_MAX_RETRIES": "0", "TOOLWIRE_ACCESS_LOG": "1"}
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with ScriptedUpstream() as upstream:
            args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
            args += ["--port", str(port), "--gemini-model", "flash=fast-model"]
            with toolwire_process(*args, health=base + "/health") as process:
                yield Served(upstream, base, key, process)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def gw(served: Served) -> Served:
    served.upstream.reset()
    return served


def test_generate(gw: Served) -> None:
    gw.upstream.add(Reply(text="Hello from toolwire.", reasoning="A greeting."))
    config = types.GenerateContentConfig(
        system_instruction="Be brief.",
        temperature=0.3,
        thinking_config=types.ThinkingConfig(include_thoughts=True),
    )
    client = gw.client()
    response = client.models.generate_content(model=MODEL, contents="hi", config=config)
    assert response.text == "Hello from toolwire."
    thought, text = response.candidates[0].content.parts  # type: ignore[index, union-attr]
    assert thought.thought is True and thought.text == "A greeting."
    assert text.thought_signature  # issued here, bytes to the SDK
    assert response.candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    usage = response.usage_metadata
    assert usage is not None and usage.prompt_token_count == 10
    assert usage.candidates_token_count == 5 and usage.total_token_count == 15
    assert response.model_version == MODEL and response.response_id
    sent = gw.upstream.chat_requests[-1].body
    assert sent["model"] == "fast-model"  # the flash family, mapped
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}


def test_stream_with_function_calling_and_the_result_going_back(gw: Served) -> None:
    gw.upstream.add(
        call_chunks("read_file", ['{"file_', 'path": "a', '.txt"}'], "call_1", "Read it first.")
    )
    client = gw.client()
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[READ])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    chunks = list(
        client.models.generate_content_stream(model=MODEL, contents="read a.txt", config=config)
    )
    calls = [call for chunk in chunks for call in chunk.function_calls or []]
    assert [(c.name, c.args, c.id) for c in calls] == [
        ("read_file", {"file_path": "a.txt"}, "call_1")
    ]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP  # type: ignore[index]
    model_turn = chunks[-1].candidates[0].content  # type: ignore[index]

    gw.upstream.add(Reply(text="The file says hello."))
    history = [
        types.Content(role="user", parts=[types.Part(text="read a.txt")]),
        model_turn,
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(name="read_file", response={"output": "hello"})
            ],
        ),
    ]
    text = "".join(
        chunk.text or ""
        for chunk in client.models.generate_content_stream(
            model=MODEL, contents=history, config=config
        )
    )
    assert text == "The file says hello."
    sent = gw.upstream.chat_requests[-1].body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[1]["reasoning_content"] == "Read it first."  # the signature replayed it
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "hello"}


def test_count_tokens_and_models(gw: Served) -> None:
    client = gw.client()
    counted = client.models.count_tokens(model=MODEL, contents="word " * 500)
    assert counted.total_tokens is not None and counted.total_tokens > 500
    listed = [model.name for model in client.models.list()]
    assert "models/scripted-model" in listed
    one = client.models.get(model="gemini-2.5-flash")  # the flash family is mapped
    assert one.name == "models/gemini-2.5-flash"
    assert one.supported_actions == ["generateContent", "countTokens"]
    with pytest.raises(errors.ClientError) as unknown:  # no default model to send it to
        client.models.get(model="gemini-2.5-pro")
    assert unknown.value.code == 404 and unknown.value.status == "NOT_FOUND"


def test_typed_errors(gw: Served) -> None:
    client = gw.client()
    with pytest.raises(errors.ClientError) as bad:
        client.models.generate_content(
            model=MODEL,
            contents="hi",
            config=types.GenerateContentConfig(candidate_count=2),
        )
    assert bad.value.code == 400 and bad.value.status == "INVALID_ARGUMENT"
    assert "candidateCount" in (bad.value.message or "")
    stranger = gw.client(key="tw-wrong")
    with pytest.raises(errors.ClientError) as unauthenticated:
        stranger.models.generate_content(model=MODEL, contents="hi")
    assert unauthenticated.value.code == 401 and unauthenticated.value.status == "UNAUTHENTICATED"
    gw.upstream.add(Body({"error": {"message": "down"}}, status=500))
    with pytest.raises(errors.ServerError) as failed:
        client.models.generate_content(model=MODEL, contents="hi")
    assert failed.value.code == 503 and failed.value.status == "UNAVAILABLE"


def test_an_error_after_the_stream_opened_is_raised(gw: Served) -> None:
    text = {"choices": [{"index": 0, "delta": {"content": "Partial answer"}}]}
    gate = threading.Event()
    gw.upstream.add(Chunks([text, text], done=False, disconnect_after=2, gate=gate, gate_at=1))
    seen = []
    client = gw.client()
    with pytest.raises(errors.APIError) as broken:
        for chunk in client.models.generate_content_stream(model=MODEL, contents="hi"):
            seen.append(chunk.text)
            gate.set()
    assert seen[:1] == ["Partial answer"]  # the text went out live, then the error
    assert broken.value.status == "UNAVAILABLE"


def test_a_key_in_the_url_works_and_is_never_logged(gw: Served) -> None:
    gw.upstream.add(Reply(text="ok"))
    secret = gw.key
    answer = httpx.post(
        f"{gw.base}/v1beta/models/{MODEL}:generateContent?key={secret}",
        json={"contents": [{"parts": [{"text": "hi"}]}]},
    )
    assert answer.status_code == 200, answer.text
    log = output_so_far(gw.process)
    assert "generateContent?key=REDACTED" in log  # uvicorn's access line, with the query
    assert secret not in log
