"""The Gemini door (`/v1beta/models/{model}:generateContent` and the rest) in process: every
request shape the issue lists reaches the upstream as it should, answers and both stream
framings have Google's shapes, the loop's repairs (split calls, leaks, malformed calls) reach a
Gemini client as whole calls, reasoning goes out and comes back as a sealed
`thoughtSignature`, and errors come back in Google's shape, also from the middlewares. The
official SDK and Gemini CLI run against a real server in tests/integration/test_gemini_sdk.py
and test_gemini_cli.py."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.inprocess_gateway import AppGateway, app_gateway
from tests.integration.test_claude_code import call_chunks
from tests.pdfs import make_pdf
from toolwire.loop.state import LoopSettings
from toolwire.server.gemini.contents import ThoughtSeal
from toolwire.server.gemini.translate import GeminiSettings
from toolwire.testing import Body, Chunks, Reply, ScriptedUpstream

DATA = Path(__file__).parents[1] / "data" / "gemini"
GENERATE = "/v1beta/models/gemini-2.5-pro:generateContent"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
READ = {
    "name": "read_file",
    "description": "Read a file",
    "parametersJsonSchema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
}
HI = [{"role": "user", "parts": [{"text": "hi"}]}]


def body(**fields: Any) -> dict[str, Any]:
    return {"contents": HI, **fields}


def with_read(**fields: Any) -> dict[str, Any]:
    return body(tools=[{"functionDeclarations": [READ]}], **fields)


async def generate(gw: AppGateway, payload: Any, path: str = GENERATE, **kwargs: Any) -> Any:
    return await gw.http.post(path, json=payload, **kwargs)


def sse_chunks(raw: bytes) -> list[dict[str, Any]]:
    """`alt=sse`: each `data:` event a GenerateContentResponse; an error after the stream
    opened is the bare error object (as Google sends it), kept as the last entry."""
    chunks = []
    for frame in raw.decode().split("\r\n\r\n"):
        frame = frame.strip()
        if not frame:
            continue
        if frame.startswith("data: "):
            chunks.append(orjson.loads(frame[len("data: ") :]))
        else:
            chunks.append(orjson.loads(frame))
    return chunks


def parts_of(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for c in chunks if "candidates" in c for p in c["candidates"][0]["content"]["parts"]]


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for p in parts_of(chunks) if not p.get("thought"))


def upstream_body(gw: AppGateway, n: int = -1) -> dict[str, Any]:
    request: dict[str, Any] = gw.upstream.chat_requests[n].body
    return request


# -- answers ---------------------------------------------------------------------------------


async def test_answer_with_thoughts_and_usage(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Hello.", reasoning="The user greets me."))
    config = {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": -1}}
    answer = await generate(gw, body(generationConfig=config))
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["modelVersion"] == "gemini-2.5-pro" and reply["responseId"]
    candidate = reply["candidates"][0]
    assert candidate["finishReason"] == "STOP" and candidate["index"] == 0
    thought, text = candidate["content"]["parts"]
    assert candidate["content"]["role"] == "model"
    assert thought == {"text": "The user greets me.", "thought": True}
    assert text["text"] == "Hello." and text["thoughtSignature"]  # on the answer's last part
    assert reply["usageMetadata"] == {
        "promptTokenCount": 10,
        "candidatesTokenCount": 5,
        "totalTokenCount": 15,
    }


async def test_usage_counts_thoughts_and_cached_prompt_tokens(gw: AppGateway) -> None:
    usage: Any = {
        "prompt_tokens": 40,
        "completion_tokens": 12,
        "total_tokens": 52,
        "completion_tokens_details": {"reasoning_tokens": 7},
        "prompt_tokens_details": {"cached_tokens": 32},
    }
    gw.upstream.add(Reply(text="Hello.", reasoning="Hmm.", usage=usage))
    assert (await generate(gw, body())).json()["usageMetadata"] == {
        "promptTokenCount": 40,
        "candidatesTokenCount": 5,  # the answer without its thoughts
        "thoughtsTokenCount": 7,
        "cachedContentTokenCount": 32,
        "totalTokenCount": 52,
    }


async def test_thoughts_are_not_shown_unless_asked(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Hello.", reasoning="Hidden reasoning."))
    (part,) = (await generate(gw, body())).json()["candidates"][0]["content"]["parts"]
    assert part["text"] == "Hello." and "thought" not in part
    assert part["thoughtSignature"]  # the reasoning still travels, sealed
    assert "Hidden reasoning." not in json.dumps(part)


async def test_sse_stream_text_goes_out_live(gw: AppGateway) -> None:
    text = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in ("Hel", "lo")]
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    gate = threading.Event()  # the second piece waits until the client has read the first
    paced = Chunks([*text, end], gate=gate, gate_at=1)
    gw.upstream.add(paced)
    chunks = []
    async with gw.http.stream("POST", STREAM + "?alt=sse", json=body()) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                chunks.append(orjson.loads(line[6:]))
                gate.set()
    assert paced.gate_opened == [True]
    assert text_of(chunks[:1]) == "Hel"  # out before the upstream went on
    assert text_of(chunks) == "Hello"
    assert all(c["responseId"] == chunks[0]["responseId"] for c in chunks)
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"]["promptTokenCount"] > 0  # counted here: the upstream gave none
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])


@pytest.mark.parametrize("alt", ["sse", "json"])
@pytest.mark.parametrize("quiet_after", [0, 1], ids=["slow_to_start", "slow_mid_answer"])
async def test_keepalive_while_the_upstream_is_quiet(alt: str, quiet_after: int) -> None:
    # The upstream stops before chunk `quiet_after` until the client has read a keep-alive
    # after `quiet_after` text chunks: blank lines come while nothing else does (order, not
    # timing), and the body stays what both SDKs read.
    text = [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in ("Hi", " there")]
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    gate = threading.Event()
    turn = Chunks([*text, finish], gate=gate, gate_at=quiet_after, gate_timeout=5)
    upstream = ScriptedUpstream.in_process()
    upstream.add(turn)
    raw = b""
    async with (
        app_gateway(upstream, gemini=GeminiSettings(keepalive_interval=0.05)) as gw,
        gw.http.stream("POST", f"{STREAM}?alt={alt}", json=body()) as answer,
    ):
        assert answer.status_code == 200
        async for piece in answer.aiter_raw():
            raw += piece
            if piece == b"\r\n" and raw.count(b"Hi") == quiet_after:
                gate.set()
    assert turn.gate_opened == [True]
    chunks = sse_chunks(raw) if alt == "sse" else json.loads(raw)
    assert text_of(chunks) == "Hi there"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


async def test_stream_without_alt_is_one_json_array(gw: AppGateway) -> None:
    gw.upstream.add(Reply(text="Streamed answer."))
    answer = await generate(gw, body(), STREAM)
    assert answer.headers["content-type"].startswith("application/json")
    chunks = json.loads(answer.text)
    assert isinstance(chunks, list) and text_of(chunks) == "Streamed answer."
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert upstream_body(gw)["stream"] is True


async def test_split_call_with_repeated_name_is_one_whole_function_call(gw: AppGateway) -> None:
    pieces = ['{"file_', 'path": "a', '.txt"}']
    gw.upstream.add(call_chunks("read_file", pieces, "call_1", "I should read a.txt."))
    config = {"thinkingConfig": {"includeThoughts": True}}
    answer = await generate(gw, with_read(generationConfig=config), STREAM + "?alt=sse")
    chunks = sse_chunks(answer.content)
    parts = parts_of(chunks)
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    assert thoughts == "I should read a.txt."  # streamed as thought parts
    (call,) = [p for p in parts if "functionCall" in p]
    assert call["functionCall"] == {
        "id": "call_1",
        "name": "read_file",
        "args": {"file_path": "a.txt"},
    }
    assert call["thoughtSignature"]  # the reasoning, sealed, on the call (as Gemini places it)
    assert parts.index(call) == len(parts) - 1  # after the thoughts
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


@pytest.mark.parametrize(
    "leak",
    [
        '<tool_call>\n{"name": "read_file", "arguments": {"file_path": "b.txt"}}\n</tool_call>',
        "<tool_call>\n<function=read_file>\n<parameter=file_path>\nb.txt\n</parameter>\n"
        "</function>\n</tool_call>",
    ],
    ids=["hermes", "qwen3_coder"],
)
async def test_leaked_call_is_recovered_as_a_function_call(gw: AppGateway, leak: str) -> None:
    gw.upstream.add(Reply(text=leak), Reply(tool_calls=[("read_file", {"file_path": "b.txt"})]))
    chunks = sse_chunks((await generate(gw, with_read(), STREAM + "?alt=sse")).content)
    calls = [p["functionCall"] for p in parts_of(chunks) if "functionCall" in p]
    assert [(c["name"], c["args"]) for c in calls] == [("read_file", {"file_path": "b.txt"})]
    assert "<tool_call>" not in json.dumps(chunks) and "<function" not in json.dumps(chunks)
    assert len(gw.upstream.chat_requests) == 2  # re-asked once


async def test_malformed_call_is_never_handed_over(gw: AppGateway) -> None:
    gw.upstream.add(
        Reply(tool_calls=[("read_file", '{"file_path": ')]),  # cut off: not repairable
        Reply(tool_calls=[("read_file", {"file_path": "c.txt"})]),
    )
    (part,) = (await generate(gw, with_read())).json()["candidates"][0]["content"]["parts"]
    assert part["functionCall"]["args"] == {"file_path": "c.txt"}
    assert upstream_body(gw)["messages"][-1]["role"] == "tool"  # the model was told


async def test_loop_giving_up_on_a_call_is_malformed_function_call() -> None:
    leak = '<tool_call>\n{"name": "read_file", "arguments": {"file_path": "x"}}\n</tool_call>'
    upstream = ScriptedUpstream.in_process()
    settings = LoopSettings(leak_retries=1)
    async with app_gateway(upstream, settings=settings, tools=()) as gw:
        upstream.add(Reply(text=leak), Reply(text=leak))
        candidate = (await generate(gw, with_read())).json()["candidates"][0]
        assert candidate["finishReason"] == "MALFORMED_FUNCTION_CALL"
        assert candidate["finishMessage"]


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "MAX_TOKENS"), ("content_filter", "SAFETY")]
)
async def test_finish_reasons(gw: AppGateway, finish: str, reason: str) -> None:
    gw.upstream.add(Reply(text="Partial", finish_reason=finish))
    candidate = (await generate(gw, body())).json()["candidates"][0]
    assert candidate["finishReason"] == reason


async def test_server_side_tools_run_inside_the_loop(gw: AppGateway) -> None:
    """The gateway's own tools (the demo `get_weather`) run here; only the client's come
    back as function calls."""
    gw.upstream.add(
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),
        Reply(tool_calls=[("read_file", {"file_path": "oslo.txt"})]),
    )
    parts = (await generate(gw, with_read())).json()["candidates"][0]["content"]["parts"]
    assert [p["functionCall"]["name"] for p in parts] == ["read_file"]
    assert upstream_body(gw)["messages"][-1]["role"] == "tool"  # get_weather's result


# -- reasoning, both ways --------------------------------------------------------------------


async def test_thought_signature_replays_reasoning_and_others_replay_nothing(
    gw: AppGateway,
) -> None:
    gw.upstream.add(Reply(tool_calls=[("read_file", {"file_path": "a"})], reasoning="Plan: read"))
    first = (await generate(gw, with_read())).json()["candidates"][0]["content"]
    signature = first["parts"][0]["thoughtSignature"]
    assert signature and first["parts"][0]["functionCall"]["name"] == "read_file"
    for sent, replayed in (
        (signature, "Plan: read"),
        ("skip_thought_signature_validator", None),  # Gemini CLI's placeholder
        (signature[:-4] + "AAAA", None),  # altered
        (ThoughtSeal(b"x" * 32).sign("forged", None), None),  # another server's
    ):
        call = dict(first["parts"][0], thoughtSignature=sent)
        history = [
            *HI,
            {"role": "model", "parts": [call]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "A"}}}],
            },
        ]
        gw.upstream.add(Reply(text="done"))
        assert (await generate(gw, with_read(contents=history))).status_code == 200
        assistant = next(m for m in upstream_body(gw)["messages"] if m["role"] == "assistant")
        assert assistant.get("reasoning_content") == replayed


def test_a_signature_is_bound_to_its_key() -> None:
    seal = ThoughtSeal(b"s" * 32)
    signature = seal.sign("secret plan", "key_a")
    assert seal.open(signature, "key_a") == "secret plan"
    assert seal.open(signature, "key_b") is None


# -- requests --------------------------------------------------------------------------------


async def test_gemini_cli_request_as_logged(gw: AppGateway) -> None:
    """The trimmed request Gemini CLI 0.61.0 sent after a read, an edit and a shell command
    (tests/data/gemini/): its history reaches the upstream as the turns it is."""
    logged = json.loads((DATA / "gemini_cli_request.json").read_text())
    gw.upstream.add(Reply(text="All done."))
    answer = await generate(gw, logged["body"], logged["path"], headers={"x-goog-api-client": "x"})
    assert answer.status_code == 200, answer.text
    sent = upstream_body(gw)
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 3
    assert sent["messages"][0]["content"].startswith("You are Gemini CLI")
    calls = [m["tool_calls"][0] for m in sent["messages"] if m["role"] == "assistant"]
    assert [c["function"]["name"] for c in calls] == ["read_file", "replace", "run_shell_command"]
    results = [m for m in sent["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert results[0]["content"] == "I like apple pie.\n"  # `output` read as the bare text
    names = [t["function"]["name"] for t in sent["tools"]]
    assert {"read_file", "replace", "run_shell_command"} <= set(names)
    skill = next(t for t in sent["tools"] if t["function"]["name"] == "activate_skill")
    assert skill["function"]["parameters"]["additionalProperties"] is False  # as sent
    assert sent["temperature"] == 1 and sent["top_p"] == 0.95 and sent["top_k"] == 64
    assert "text" in answer.text


async def test_gemini_cli_classifier_gets_structured_output(gw: AppGateway) -> None:
    """Gemini CLI's router asks with `responseJsonSchema` in Gemini's upper-case types: the
    upstream gets JSON Schema it can decode with."""
    logged = json.loads((DATA / "gemini_cli_classifier_request.json").read_text())
    gw.upstream.add(Reply(text='{"complexity_reasoning": "easy", "complexity_score": 3}'))
    answer = await generate(gw, logged["body"], logged["path"])
    assert answer.status_code == 200, answer.text
    schema = upstream_body(gw)["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert schema["properties"]["complexity_score"]["type"] == "integer"


async def test_request_shapes_reach_the_upstream(gw: AppGateway) -> None:
    png = "iVBORw0KGgo="
    declaration = {
        "name": "find",
        "description": "Find things",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "query": {"type": "STRING", "nullable": True},
                "limit": {"type": "INTEGER", "format": "int32"},
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            },
            "required": ["query"],
            "propertyOrdering": ["query", "limit", "tags"],
        },
    }
    history = [
        {
            "role": "user",
            "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": png}}],
        },
        {
            "role": "model",
            "parts": [
                {"text": "Looking."},
                {"functionCall": {"name": "find", "args": {"query": "a"}}},
                {"functionCall": {"name": "find", "args": {"query": "b"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "find", "response": {"output": "A"}}},
                {
                    "functionResponse": {
                        "name": "find",
                        "response": {"error": "no b"},
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": png}}],
                    }
                },
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a.jpg"}},
                {"inline_data": {"mime_type": "text/plain", "data": "bm90ZXM="}},
            ],
        },
    ]
    gw.upstream.add(Reply(text="ok"))
    payload = {
        "contents": history,
        "system_instruction": {"parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
        "tools": [{"functionDeclarations": [declaration]}],
        "toolConfig": {
            "functionCallingConfig": {"mode": "AUTO", "streamFunctionCallArguments": True}
        },
        "generationConfig": {
            "temperature": 0.2,
            "topP": 0.9,
            "top_k": 5,
            "maxOutputTokens": 99,
            "stopSequences": ["END"],
            "seed": 7,
            "presencePenalty": 0.5,
            "candidateCount": 1,
            "responseModalities": ["TEXT"],
            "thinkingConfig": {"thinkingLevel": "SOMETHING_NEW", "thinkingBudget": 0},
            "mediaResolution": "MEDIA_RESOLUTION_LOW",
        },
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "cachedContent": "cachedContents/abc",
        "labels": {"team": "x"},
        "aFieldFromTheFuture": {"any": ["value"]},
    }
    assert (await generate(gw, payload)).status_code == 200
    sent = upstream_body(gw)
    system, user, assistant, found_a, found_b, result_image, rest = sent["messages"]
    assert system == {"role": "system", "content": "Be brief.\nBe kind."}
    assert user["content"][1]["image_url"]["url"] == f"data:image/png;base64,{png}"
    assert assistant["content"] == "Looking."
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(ids)) == 2  # calls without ids got one each...
    assert [found_a["tool_call_id"], found_b["tool_call_id"]] == ids  # ...answered in order
    assert found_a["content"] == "A" and found_b["content"] == "Error: no b"
    assert result_image["content"][1]["image_url"]["url"] == f"data:image/png;base64,{png}"
    assert rest["content"] == [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
        {"type": "text", "text": "notes"},
    ]
    find = next(t for t in sent["tools"] if t["function"]["name"] == "find")  # after the demo's
    parameters = find["function"]["parameters"]
    assert parameters == {
        "type": "object",
        "properties": {
            "query": {"type": ["string", "null"]},
            "limit": {"type": "integer", "format": "int32"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["query"],
    }
    assert sent["tool_choice"] == "auto"
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0.2, 0.9, 5)
    assert sent["stop"] == ["END"] and sent["seed"] == 7 and sent["presence_penalty"] == 0.5
    assert sent["max_tokens"] == 99 or sent.get("max_completion_tokens") == 99


ALL3 = ["read_file", "write_file", "list_dir"]


@pytest.mark.parametrize(
    ("config", "choice", "offered"),
    [
        ({"mode": "ANY"}, "required", ALL3),
        (
            {"mode": "ANY", "allowedFunctionNames": ["write_file"]},
            {"type": "function", "function": {"name": "write_file"}},
            ALL3,
        ),
        (
            {"mode": "ANY", "allowedFunctionNames": ["read_file", "write_file"]},
            "required",
            ["read_file", "write_file"],  # only these may be called: only these are offered
        ),
        ({"mode": "NONE"}, "none", ALL3),
        ({"mode": "VALIDATED"}, "auto", ALL3),
        ({"allowedFunctionNames": ["read_file"]}, "auto", ALL3),  # AUTO: names do not apply
    ],
)
async def test_function_calling_config(
    gw: AppGateway, config: dict[str, Any], choice: Any, offered: list[str]
) -> None:
    write = {"name": "write_file", "parameters": {"type": "OBJECT", "properties": {}}}
    listing = {"name": "list_dir"}
    payload = body(
        tools=[{"functionDeclarations": [READ, write]}, {"function_declarations": [listing]}],
        toolConfig={"functionCallingConfig": config},
    )
    gw.upstream.add(Reply(text="ok"))
    assert (await generate(gw, payload)).status_code == 200
    sent = upstream_body(gw)
    assert sent["tool_choice"] == choice
    names = [t["function"]["name"] for t in sent["tools"]]
    assert [name for name in names if name in ALL3] == offered


async def test_structured_output(gw: AppGateway) -> None:
    schema = {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}
    for config, expected in (
        ({"responseMimeType": "application/json", "responseSchema": schema}, "json_schema"),
        ({"responseMimeType": "application/json"}, "json_object"),
    ):
        gw.upstream.add(Reply(text='{"n": 1}'))
        answer = await generate(gw, body(generationConfig=config))
        assert answer.json()["candidates"][0]["content"]["parts"][0]["text"] == '{"n": 1}'
        assert upstream_body(gw)["response_format"]["type"] == expected


@pytest.mark.parametrize(
    ("payload", "field", "needle"),
    [
        ({}, "contents", "contents"),
        ({"contents": []}, "contents", "non-empty"),
        (
            {"contents": [{"role": "system", "parts": [{"text": "x"}]}]},
            "contents[0].role",
            "unknown value 'system'; toolwire knows user, model, function",
        ),
        ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts", "non-empty"),
        (
            body(generationConfig={"candidateCount": 2}),
            "generationConfig.candidateCount",
            "unknown value 2; toolwire knows 1",
        ),
        (
            body(generationConfig={"responseMimeType": "text/x.enum"}),
            "generationConfig.responseMimeType",
            "toolwire knows text/plain, application/json",
        ),
        (
            body(generationConfig={"responseModalities": ["IMAGE"]}),
            "generationConfig.responseModalities",
            "unknown value 'IMAGE'; toolwire knows TEXT",
        ),
        (
            body(generationConfig={"temperature": 3}),
            "generationConfig.temperature",
            "between 0 and 2",
        ),
        (
            body(toolConfig={"functionCallingConfig": {"mode": "SOMETIMES"}}),
            "toolConfig.functionCallingConfig.mode",
            "toolwire knows AUTO, MODE_UNSPECIFIED, VALIDATED, ANY, NONE",
        ),
        (body(tools=[{"codeExecution": {}}]), "tools[0].codeExecution", "not served"),
        (
            with_read(
                toolConfig={
                    "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["nope"]}
                }
            ),
            "toolConfig.functionCallingConfig.allowedFunctionNames",
            "nope",
        ),
        (
            body(
                contents=[
                    {"parts": [{"inlineData": {"mimeType": "application/pdf", "data": "JVBE"}}]}
                ]
            ),
            "contents[0].parts[0].inlineData.data",
            "PDF cannot be read",
        ),
        (
            body(contents=[{"parts": [{"fileData": {"fileUri": "files/abc"}}]}]),
            "contents[0].parts[0].fileData.fileUri",
            "Files API",
        ),
        ([1, 2], "", "object"),
        # a number's field holding an object (found by the fuzz suite: it was a 500)
        (
            body(generationConfig={"frequencyPenalty": {}}),
            "generationConfig.frequencyPenalty",
            "number",
        ),
    ],
)
async def test_bad_requests_are_google_400s(
    gw: AppGateway, payload: Any, field: str, needle: str
) -> None:
    answer = await generate(gw, payload)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith(field) and needle in error["message"]
    assert gw.upstream.chat_requests == []


# -- errors ----------------------------------------------------------------------------------


async def test_transport_errors_in_google_shape(gw: AppGateway) -> None:
    bad_json = await gw.http.post(
        GENERATE, content=b"{nope", headers={"content-type": "application/json"}
    )
    assert bad_json.status_code == 400 and bad_json.json()["error"]["status"] == "INVALID_ARGUMENT"
    for method, path in (
        ("POST", "/v1beta/models/gemini-2.5-pro:embedContent"),  # a method not served
        ("POST", "/v1beta/tunedModels/x:generateContent"),
        ("GET", "/v1/models/gemini-2.5-pro"),  # no Google key: not a Gemini client's request
    ):
        wrong = await gw.http.request(method, path, json={})
        assert wrong.status_code == 404, (method, path)
        assert wrong.json()["error"]["status"] == "NOT_FOUND", (method, path)
    for path in (GENERATE, "/v1/models/m:countTokens"):  # a method's path, not a model's name
        wrong_method = await gw.http.get(path)
        assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
        assert wrong_method.json()["error"] == {
            "code": 405,
            "message": wrong_method.json()["error"]["message"],
            "status": "UNIMPLEMENTED",
        }
    # a name with a colon is still a name (Ollama's)
    named = await gw.http.get("/v1beta/models/llama3:8b", headers={"x-goog-api-key": "k"})
    assert named.status_code == 404 and "models/llama3:8b" in named.json()["error"]["message"]
    too_big = await gw.http.post(
        GENERATE, content=b" " * (5 * 1024 * 1024), headers={"content-type": "application/json"}
    )
    assert too_big.status_code == 400 and too_big.json()["error"]["status"] == "INVALID_ARGUMENT"
    form = await gw.http.post(GENERATE, content=b"a=b", headers={"content-type": "text/plain"})
    assert form.status_code == 400 and set(form.json()["error"]) == {"code", "message", "status"}
    assert (await gw.http.post(STREAM + "?alt=proto", json=body())).json()["error"]["message"] == (
        "alt: unknown value 'proto'; toolwire knows json, sse"
    )


@pytest.mark.parametrize(
    ("upstream_status", "status", "name"),
    [(429, 429, "RESOURCE_EXHAUSTED"), (503, 503, "UNAVAILABLE"), (500, 503, "UNAVAILABLE")],
)
async def test_upstream_failures_in_google_shape(
    gw: AppGateway, upstream_status: int, status: int, name: str
) -> None:
    failure = Body({"error": {"message": "busy"}}, status=upstream_status)
    gw.upstream.add(failure, failure, failure)
    answer = await generate(gw, body(), STREAM + "?alt=sse")
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["status"] == name and answer.json()["error"]["code"] == status


@pytest.mark.parametrize("alt", ["sse", "json"])
async def test_failure_mid_stream_ends_with_an_error_object(gw: AppGateway, alt: str) -> None:
    text = {"choices": [{"index": 0, "delta": {"content": "Partial answer"}}]}
    gate = threading.Event()
    gw.upstream.add(Chunks([text, text], done=False, disconnect_after=2, gate=gate, gate_at=1))
    raw = b""
    async with gw.http.stream("POST", f"{STREAM}?alt={alt}", json=body()) as stream:
        async for piece in stream.aiter_bytes():
            raw += piece
            gate.set()  # the client has the first text: now the upstream breaks
    chunks = sse_chunks(raw) if alt == "sse" else json.loads(raw)
    assert text_of(chunks[:1]).startswith("Partial answer")
    assert chunks[-1]["error"]["status"] == "UNAVAILABLE", "never a silent end"
    assert all("finishReason" not in c.get("candidates", [{}])[0] for c in chunks)


async def test_keys_as_x_goog_api_key_or_query_and_errors_in_google_shape(
    gw: AppGateway,
) -> None:
    _, key = await gw.store.keys.create("gemini")
    refused = await generate(gw, body())
    assert refused.status_code == 401
    assert refused.json()["error"]["status"] == "UNAUTHENTICATED"
    wrong = await generate(gw, body(), headers={"x-goog-api-key": "tw-wrong"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == 401
    for path, headers in ((GENERATE, {"x-goog-api-key": key}), (f"{GENERATE}?key={key}", {})):
        gw.upstream.add(Reply(text="ok"))
        answer = await generate(gw, body(), path, headers=headers)
        assert answer.status_code == 200, answer.text
    listed = await gw.http.get(f"/v1/models?key={key}")
    assert "models" in listed.json()  # Google's shape: the key came as Google's clients send it
    assert (await gw.http.get("/v1/models", headers={"x-goog-api-key": "bad"})).json()["error"][
        "status"
    ] == "UNAUTHENTICATED"


def test_query_key_is_redacted_from_the_scope() -> None:
    from toolwire.server.gate.auth import redact_query_key

    path = "/v1beta/models/m:streamGenerateContent"
    scope: dict[str, Any] = {"path": path, "query_string": b"alt=sse&key=tw-secret%2Bx"}
    assert redact_query_key(scope) == "tw-secret+x"
    assert scope["query_string"] == b"alt=sse&key=REDACTED"
    untouched: dict[str, Any] = {"path": path, "query_string": b"alt=sse"}
    assert redact_query_key(untouched) is None and untouched["query_string"] == b"alt=sse"
    # elsewhere `key` is the route's own parameter (/ui filters by key id): left as it is
    ui: dict[str, Any] = {"path": "/ui/api/responses", "query_string": b"key=key_abc"}
    assert redact_query_key(ui) is None and ui["query_string"] == b"key=key_abc"


# -- counting, models, windows ---------------------------------------------------------------


async def test_count_tokens_both_shapes_match_what_usage_reports(gw: AppGateway) -> None:
    count = "/v1beta/models/gemini-2.5-pro:countTokens"
    small = (await gw.http.post(count, json=with_read())).json()
    assert small["promptTokensDetails"] == [
        {"modality": "TEXT", "tokenCount": small["totalTokens"]}
    ]
    wrapped = await gw.http.post(
        count, json={"generateContentRequest": {"model": "models/x", **with_read()}}
    )
    assert wrapped.json()["totalTokens"] == small["totalTokens"]
    long = with_read(contents=[{"parts": [{"text": "word " * 2000}]}])
    assert (await gw.http.post(count, json=long)).json()["totalTokens"] > small[
        "totalTokens"
    ] + 1000
    gw.upstream.add(Reply(text="ok", usage={"completion_tokens": 1}))
    chunks = sse_chunks((await generate(gw, with_read(), STREAM + "?alt=sse")).content)
    assert chunks[-1]["usageMetadata"]["promptTokenCount"] == small["totalTokens"]
    assert gw.upstream.chat_requests[-1].path.endswith("/chat/completions")


async def test_model_mapping_listing_and_context_window() -> None:
    upstream = ScriptedUpstream.in_process(models=["big-model", "small-model"])
    settings = GeminiSettings(
        models={"flash-lite": "small-model", "gemini-2.5-pro": "big-model"}, context_window=400
    )
    async with app_gateway(upstream, gemini=settings, tools=()) as gw:
        for requested, model in (
            ("gemini-3.5-flash-lite", "small-model"),
            ("gemini-2.5-pro", "big-model"),
            ("gemini-3-flash-preview", "gemini-3-flash-preview"),  # no default: passed through
        ):
            upstream.add(Reply(text="ok"))
            config = {"maxOutputTokens": 10_000}
            path = f"/v1beta/models/{requested}:generateContent"
            answer = await generate(gw, body(generationConfig=config), path)
            assert answer.json()["modelVersion"] == requested
            sent = upstream_body(gw)
            assert sent["model"] == model
            assert sent.get("max_tokens", sent.get("max_completion_tokens")) < 400  # capped
        listed = (await gw.http.get("/v1beta/models")).json()["models"]
        assert [m["name"] for m in listed] == [
            "models/gemini-2.5-pro",
            "models/big-model",
            "models/small-model",
        ]
        assert listed[0]["inputTokenLimit"] == 400 and listed[0]["outputTokenLimit"] == 400
        assert "generateContent" in listed[0]["supportedGenerationMethods"]
        one = await gw.http.get("/v1beta/models/gemini-2.5-pro")
        assert one.json()["name"] == "models/gemini-2.5-pro"
        assert (await gw.http.get("/v1beta/models/unknown")).status_code == 404
        too_long = await generate(gw, body(contents=[{"parts": [{"text": "word " * 2000}]}]))
        assert too_long.status_code == 400
        assert too_long.json()["error"]["message"].startswith("The input token count (")
        openai_list = await gw.http.get("/v1/models")
        assert openai_list.json()["object"] == "list"  # OpenAI's, without a Google key


async def test_google_search_runs_in_the_loop_and_says_so_without_a_backend(
    gw: AppGateway,
) -> None:
    """`googleSearch` (what Gemini CLI's google_web_search asks for) is served inside the loop
    by the operator's search backend: the model is offered `web_search`. On a gateway without
    one, its call is an error the model reads and can act on, not a failed request
    (tests/integration/test_gemini_cli.py runs the search on a backend)."""
    gw.upstream.add(
        Reply(tool_calls=[("web_search", {"query": "toolwire"})]),
        Reply(text="I cannot search here."),
    )
    answer = await generate(gw, body(tools=[{"googleSearch": {}}]))
    assert answer.status_code == 200, answer.text
    assert answer.json()["candidates"][0]["content"]["parts"] == [{"text": "I cannot search here."}]
    first, second = (r.body for r in gw.upstream.chat_requests)
    assert "web_search" in [t["function"]["name"] for t in first["tools"]]
    (result,) = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert "web search is not configured" in result, result


async def test_a_pdf_sent_inline_reaches_the_model_as_its_text(gw: AppGateway) -> None:
    """What Gemini CLI's read tool sends for a `.pdf`: the door reads it (off the event loop)
    and the upstream gets its text, page by page."""
    data = base64.b64encode(make_pdf(["Quarterly revenue grew 12%"])).decode()
    gw.upstream.add(Reply(text="It grew."))
    answer = await generate(
        gw,
        body(
            contents=[
                {
                    "role": "user",
                    "parts": [
                        {"text": "summarize"},
                        {"inlineData": {"mimeType": "application/pdf", "data": data}},
                    ],
                }
            ]
        ),
    )
    assert answer.status_code == 200, answer.text
    sent = orjson.dumps(gw.upstream.chat_requests[-1].body["messages"]).decode()
    assert "Quarterly revenue grew 12%" in sent and "--- page 1 ---" in sent
