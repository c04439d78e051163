"""Calls that fit the tool (issue #35), on every door, with the real clients' own tool schemas:
Claude Code's on `/v1/messages`, Codex's on `/v1/responses` (and its WebSocket mode), opencode's
on `/v1/chat/completions`, Gemini CLI's on `/v1beta/models/{model}:generateContent` and
`:streamGenerateContent` (declared as Gemini CLI declares them, `parametersJsonSchema`, and in
the OpenAPI dialect of Gemini's `parameters`, upper-case types; tests/data/: the requests those
clients sent, logged on loopback).

What a client gets: a call that fits, byte for byte as the model wrote it; a call repaired with
one meaning (`"5"` for an integer, a JSON string for an array, a lone `arguments` wrapper,
`null` for a tool without required properties), repaired; a call that does not fit (a missing
required property, an enum miss, `null` where properties are required), never: the model is
asked again, out of the client's sight, and the client gets the call it made next (one call,
never two, never an `api_error`). A second misfit in a row reaches the client as written. The
model's own call ids come back verbatim (Kimi-K2's `functions.name:idx`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import pytest_asyncio

from tests.inprocess.test_gemini import sse_chunks as gemini_sse_chunks
from tests.inprocess.test_messages import events_of
from tests.inprocess_gateway import (
    AppGateway,
    app_gateway,
    chat_chunks,
    sse_events,
    websocket_scope,
)
from toolwire.testing import Reply, ScriptedUpstream

#: One gateway for the module (its tests reset the script): a gateway a test costs ~50 ms.
pytestmark = pytest.mark.asyncio(loop_scope="module")

DATA = Path(__file__).parents[1] / "data"
CLAUDE = {
    tool["name"]: tool
    for tool in json.loads((DATA / "anthropic" / "claude_code_request.json").read_text())["body"][
        "tools"
    ]
}
CODEX = {
    tool["name"]: tool
    for tool in json.loads((DATA / "codex" / "codex_request.json").read_text())["body"]["tools"]
    if tool.get("type") == "function"
}
GEMINI_CLI = {
    declaration["name"]: declaration
    for tool in json.loads((DATA / "gemini" / "gemini_cli_request.json").read_text())["body"][
        "tools"
    ]
    for declaration in tool.get("functionDeclarations") or []
}
OPENCODE = {
    tool["function"]["name"]: tool["function"]
    for tool in json.loads((DATA / "opencode" / "opencode_request.json").read_text())["body"][
        "tools"
    ]
}

DOORS = [
    "chat",
    "chat_stream",
    "responses",
    "responses_stream",
    "websocket",
    "messages",
    "messages_stream",
    "gemini",
    "gemini_stream",
    "gemini_openapi",
    "gemini_openapi_stream",
]
"""`gemini_stream`: `alt=sse`; `gemini_openapi_stream`: the JSON array (no `alt`), the tool
declared as `parameters` in Gemini's OpenAPI dialect."""


@dataclass(frozen=True)
class Tool:
    """A client's tool, as that client declared it."""

    name: str
    schema: dict[str, Any]
    description: str = ""
    strict: bool | None = None


def claude(name: str) -> Tool:
    tool = CLAUDE[name]
    return Tool(name, tool["input_schema"], tool.get("description", ""))


def codex(name: str) -> Tool:
    tool = CODEX[name]
    return Tool(name, tool["parameters"], tool.get("description", ""), tool.get("strict"))


def opencode(name: str) -> Tool:
    tool = OPENCODE[name]
    return Tool(name, tool["parameters"], tool.get("description", ""))


def gemini_cli(name: str) -> Tool:
    declaration = GEMINI_CLI[name]
    return Tool(name, declaration["parametersJsonSchema"], declaration.get("description", ""))


def family(door: str) -> str:
    return door.split("_")[0].replace("websocket", "responses")


def tool_for(door: str, *, chat: str, responses: str, messages: str, gemini: str) -> Tool:
    """The named tool of the client that speaks this door (chat: opencode; responses and its
    WebSocket: Codex; messages: Claude Code; gemini: Gemini CLI)."""
    kind = family(door)
    if kind == "chat":
        return opencode(chat)
    if kind == "gemini":
        return gemini_cli(gemini)
    return codex(responses) if kind == "responses" else claude(messages)


@dataclass
class Seen:
    """What the client got: each call (name, id, its arguments as the client reads them: the
    text on the doors that send text, the input object's JSON on Messages JSON), the call
    items or blocks shown (any status), and an error, if the turn ended in one."""

    calls: list[tuple[str, str, str]] = field(default_factory=list)
    shown: int = 0
    error: str | None = None
    body: str = ""
    """All the client received, as text."""

    @property
    def arguments(self) -> list[Any]:
        return [orjson.loads(text) for _, _, text in self.calls]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared_gateway() -> AsyncIterator[AppGateway]:
    async with app_gateway(ScriptedUpstream.in_process()) as gateway:
        yield gateway


@pytest.fixture
def gw(shared_gateway: AppGateway) -> AppGateway:
    shared_gateway.upstream.reset()
    return shared_gateway


# -- each door, as its clients speak it ------------------------------------------------------


async def ask(gw: AppGateway, door: str, tool: Tool) -> Seen:
    return await ASK[family(door)](gw, door.endswith("stream") or door == "websocket", door, tool)


async def ask_chat(gw: AppGateway, stream: bool, door: str, tool: Tool) -> Seen:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.schema,
                },
            }
        ],
        "stream": stream,
    }
    answer = await gw.http.post("/v1/chat/completions", json=body)
    seen = Seen()
    seen.body = answer.text
    if not stream:
        assert answer.status_code == 200, answer.text
        for call in answer.json()["choices"][0]["message"].get("tool_calls") or []:
            function = call["function"]
            seen.calls.append((function["name"], call["id"], function["arguments"]))
        seen.shown = len(seen.calls)
        return seen
    built: dict[int, list[str]] = {}
    chunks, _ = chat_chunks(answer.content)
    for chunk in chunks:
        if "error" in chunk:
            seen.error = chunk["error"]["message"]
            continue
        for choice in chunk.get("choices") or []:
            for piece in choice["delta"].get("tool_calls") or []:
                entry = built.setdefault(piece["index"], ["", "", ""])
                function = piece.get("function") or {}
                entry[0] += function.get("name") or ""
                entry[1] += piece.get("id") or ""
                entry[2] += function.get("arguments") or ""
    seen.calls = [(name, call_id, text) for name, call_id, text in built.values()]
    seen.shown = len(seen.calls)
    return seen


def responses_body(tool: Tool, **extra: Any) -> dict[str, Any]:
    declared: dict[str, Any] = {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.schema,
    }
    if tool.strict is not None:
        declared["strict"] = tool.strict
    return {"model": "m", "input": "go", "tools": [declared], **extra}


def from_response_events(events: list[dict[str, Any]]) -> Seen:
    """The calls of a streamed response (SSE or WebSocket), checked as a client reads them:
    every item's argument deltas concatenate to its `.done` arguments."""
    seen = Seen()
    seen.body = json.dumps(events)
    deltas: dict[str, list[str]] = {}
    for event in events:
        kind = event["type"]
        if kind == "response.function_call_arguments.delta":
            deltas.setdefault(event["item_id"], []).append(event["delta"])
        elif kind == "response.output_item.done" and event["item"]["type"] == "function_call":
            item = event["item"]
            assert "".join(deltas.get(item["id"], [])) == item["arguments"]
            seen.shown += 1
            if item["status"] == "completed":
                seen.calls.append((item["name"], item["call_id"], item["arguments"]))
        elif kind == "error":
            seen.error = event.get("message") or str(event)
    final = events[-1]
    assert final["type"].startswith("response."), final
    stored = [i for i in final["response"]["output"] if i["type"] == "function_call"]
    assert [(i["name"], i["call_id"], i["arguments"]) for i in stored] == seen.calls or seen.error
    return seen


async def ask_responses(gw: AppGateway, stream: bool, door: str, tool: Tool) -> Seen:
    if door == "websocket":
        return from_response_events(await websocket_events(gw, responses_body(tool)))
    answer = await gw.http.post("/v1/responses", json=responses_body(tool, stream=stream))
    assert answer.status_code == 200, answer.text
    if stream:
        return from_response_events(sse_events(answer.content))
    body = answer.json()
    seen = Seen()
    seen.body = answer.text
    for item in body["output"]:
        if item["type"] == "function_call":
            seen.shown += 1
            if item["status"] == "completed":
                seen.calls.append((item["name"], item["call_id"], item["arguments"]))
    return seen


async def websocket_events(gw: AppGateway, create: dict[str, Any]) -> list[dict[str, Any]]:
    """One `response.create` over the WebSocket mode of `/v1/responses`, driven as raw ASGI
    (as tests/inprocess/test_websocket_bounds.py does): its events up to the terminal one."""
    message = json.dumps({"type": "response.create", **create})
    offered = [{"type": "websocket.connect"}, {"type": "websocket.receive", "text": message}]
    events: list[dict[str, Any]] = []
    finished = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if offered:
            return offered.pop(0)
        await finished.wait()
        return {"type": "websocket.disconnect", "code": 1000}

    async def send(sent: dict[str, Any]) -> None:
        if sent["type"] == "websocket.send":
            event = json.loads(sent["text"])
            events.append(event)
            if event["type"] in ("response.completed", "response.failed", "response.incomplete"):
                finished.set()

    await asyncio.wait_for(gw.app(websocket_scope(), receive, send), 30)
    return events


async def ask_messages(gw: AppGateway, stream: bool, door: str, tool: Tool) -> Seen:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"name": tool.name, "description": tool.description, "input_schema": tool.schema}
        ],
        "stream": stream,
    }
    answer = await gw.http.post("/v1/messages", json=body)
    seen = Seen()
    seen.body = answer.text
    if not stream:
        assert answer.status_code == 200, answer.text
        for block in answer.json()["content"]:
            if block["type"] == "tool_use":
                seen.calls.append(
                    (block["name"], block["id"], orjson.dumps(block["input"]).decode())
                )
        seen.shown = len(seen.calls)
        return seen
    blocks: dict[int, list[str]] = {}
    for event in events_of(answer.content):
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            block = event["content_block"]
            blocks[event["index"]] = [block["name"], block["id"], ""]
            seen.shown += 1
        elif (
            event["type"] == "content_block_delta" and event["delta"]["type"] == "input_json_delta"
        ):
            blocks[event["index"]][2] += event["delta"]["partial_json"]
        elif event["type"] == "error":
            seen.error = event["error"]["type"] + ": " + event["error"]["message"]
    seen.calls = [(name, call_id, text) for name, call_id, text in blocks.values()]
    return seen


#: Gemini's `Schema` keywords typed int64, which the proto JSON mapping writes as strings (the
#: JS SDK's `Schema` types them `string`).
INT64 = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def openapi(schema: Any) -> Any:
    """A JSON Schema as Gemini's `parameters` take it (the OpenAPI subset of its `Schema`):
    types in upper case, `propertyOrdering`, int64 limits as strings, no `$schema` or
    `additionalProperties` (its `Schema` has neither)."""
    if isinstance(schema, list):
        return [openapi(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$schema", "additionalProperties"):
            continue
        if key == "type" and isinstance(value, str):
            out[key] = value.upper()
        elif key == "properties":
            out[key] = {name: openapi(sub) for name, sub in value.items()}
            out["propertyOrdering"] = list(value)
        elif key in INT64:
            out[key] = str(value)
        else:
            out[key] = openapi(value) if key in ("items", "anyOf") else value
    return out


async def ask_gemini(gw: AppGateway, stream: bool, door: str, tool: Tool) -> Seen:
    """Gemini CLI's way: its functions in `functionDeclarations`, a call read from a
    `functionCall` part's `args` (an object: Gemini has no argument text)."""
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if "openapi" in door:
        declaration["parameters"] = openapi(tool.schema)
    else:
        declaration["parametersJsonSchema"] = tool.schema
    body = {
        "contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [declaration]}],
    }
    sse = door == "gemini_stream"
    action = "streamGenerateContent" if stream else "generateContent"
    path = f"/v1beta/models/gemini-2.5-pro:{action}" + ("?alt=sse" if sse else "")
    answer = await gw.http.post(path, json=body)
    assert answer.status_code == 200, answer.text
    if not stream:
        chunks = [answer.json()]
    else:
        chunks = gemini_sse_chunks(answer.content) if sse else json.loads(answer.text)
    seen = Seen()
    seen.body = answer.text
    for chunk in chunks:
        if "error" in chunk:
            seen.error = chunk["error"]["message"]
        for candidate in chunk.get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                call = part.get("functionCall")
                if call is not None:
                    # a call goes out once judged: in the run's last chunk, with its reason
                    assert chunk is chunks[-1] and candidate["finishReason"] == "STOP"
                    args = orjson.dumps(call["args"]).decode()
                    seen.calls.append((call["name"], call.get("id", ""), args))
    seen.shown = len(seen.calls)
    return seen


ASK: dict[str, Callable[[AppGateway, bool, str, Tool], Any]] = {
    "chat": ask_chat,
    "responses": ask_responses,
    "messages": ask_messages,
    "gemini": ask_gemini,
}


def asked_again(gw: AppGateway) -> str:
    """What the model read when it was asked again: the error results of its turn."""
    second = gw.upstream.chat_requests[1].body["messages"]
    return "\n".join(m["content"] for m in second if m["role"] == "tool")


# -- repairs with one meaning ----------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
async def test_a_numeric_string_is_repaired(gw: AppGateway, door: str) -> None:
    tool = tool_for(
        door, chat="read", responses="exec_command", messages="Read", gemini="read_file"
    )
    path = {"chat": "filePath", "responses": "cmd"}.get(family(door), "file_path")
    number = {"responses": "max_output_tokens", "gemini": "start_line"}.get(family(door), "limit")
    gw.upstream.add(Reply(tool_calls=[(tool.name, f'{{"{path}": "/src/a.py", "{number}": "5"}}')]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [{path: "/src/a.py", number: 5}] and seen.error is None
    assert len(gw.upstream.chat_requests) == 1  # repaired, not asked again


@pytest.mark.parametrize("door", DOORS)
async def test_a_stringified_array_or_object_is_repaired(gw: AppGateway, door: str) -> None:
    todos = [{"content": "write the tests", "status": "pending", "priority": "high"}]
    questions = [{"header": "Pick", "id": "pick", "question": "Which?", "options": []}]
    written = {
        "chat": ("todowrite", {"todos": json.dumps(todos)}, {"todos": todos}),
        "responses": (
            "request_user_input",
            {"questions": json.dumps(questions)},
            {"questions": questions},
        ),
        # DeepSeek's wrapper, holding the object as a JSON string
        "messages": ("Bash", {"arguments": json.dumps({"command": "ls"})}, {"command": "ls"}),
        "gemini": (
            "list_directory",
            {"dir_path": "src", "ignore": '["*.pyc"]', "file_filtering_options": "{}"},
            {"dir_path": "src", "ignore": ["*.pyc"], "file_filtering_options": {}},
        ),
    }[family(door)]
    name, wrote, meant = written
    tool = tool_for(door, chat=name, responses=name, messages=name, gemini=name)
    gw.upstream.add(Reply(tool_calls=[(tool.name, wrote)]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [meant] and len(gw.upstream.chat_requests) == 1


@pytest.mark.parametrize("door", DOORS)
async def test_a_lone_wrapper_is_unwrapped(gw: AppGateway, door: str) -> None:
    tool = tool_for(
        door, chat="bash", responses="exec_command", messages="Bash", gemini="run_shell_command"
    )
    inner = (
        {"cmd": "git status"}
        if family(door) == "responses"
        else {"command": "git status", "description": "Show the working tree status"}
    )
    wrapper = {"chat": "input", "responses": "arguments", "messages": "parameters"}.get(
        family(door), "args"
    )
    gw.upstream.add(Reply(tool_calls=[(tool.name, {wrapper: inner})]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [inner] and len(gw.upstream.chat_requests) == 1


@pytest.mark.parametrize("door", DOORS)
async def test_null_for_a_tool_without_required_properties_is_an_empty_object(
    gw: AppGateway, door: str
) -> None:
    tool = claude("DeferredToolPlaceholder")  # Claude Code's `{"type": "object", "properties": {}}`
    gw.upstream.add(Reply(tool_calls=[(tool.name, "null")]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [{}] and seen.shown == 1 and seen.error is None
    assert len(gw.upstream.chat_requests) == 1


# -- re-asked, out of the client's sight -----------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
async def test_a_missing_required_property_is_asked_again_unseen(gw: AppGateway, door: str) -> None:
    tool = tool_for(door, chat="read", responses="view_image", messages="Read", gemini="read_file")
    path = {"chat": "filePath", "responses": "path"}.get(family(door), "file_path")
    good = {path: "/src/a.py"}
    gw.upstream.add(
        Reply(tool_calls=[(tool.name, "{}")], call_ids=["call_first"]),
        Reply(tool_calls=[(tool.name, good)], call_ids=["call_second"]),
    )
    seen = await ask(gw, door, tool)
    assert seen.arguments == [good] and seen.shown == 1 and seen.error is None
    assert [call_id for _, call_id, _ in seen.calls] == ["call_second"]
    told = asked_again(gw)
    assert f'at $: "{path}" is a required property' in told and tool.name in told


@pytest.mark.parametrize("door", DOORS)
async def test_an_enum_miss_or_an_extra_key_is_asked_again_unseen(
    gw: AppGateway, door: str
) -> None:
    # Claude Code's six logged tools declare no enum: its closed objects refuse an extra key
    name, wrong, good, said = {
        "chat": (
            "webfetch",
            {"url": "https://example.com", "format": "pdf"},
            {"url": "https://example.com", "format": "markdown"},
            'at $.format: "pdf" is not one of "text", "markdown" or "html"',
        ),
        "responses": (
            "exec_command",
            {"cmd": "make", "sandbox_permissions": "root"},
            {"cmd": "make", "sandbox_permissions": "require_escalated"},
            "at $.sandbox_permissions:",
        ),
        "messages": (
            "Bash",
            {"command": "make", "cwd": "/src"},
            {"command": "make"},
            "('cwd' was unexpected)",
        ),
        "gemini": (
            "activate_skill",
            {"name": "pdf"},
            {"name": "skill-creator"},
            'at $.name: "pdf" is not one of "skill-creator" or "antigravity-support"',
        ),
    }[family(door)]
    tool = tool_for(door, chat=name, responses=name, messages=name, gemini=name)
    gw.upstream.add(Reply(tool_calls=[(name, wrong)]), Reply(tool_calls=[(name, good)]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [good] and seen.shown == 1 and seen.error is None
    assert said in asked_again(gw)


@pytest.mark.parametrize("door", DOORS)
async def test_null_where_properties_are_required_is_asked_again(gw: AppGateway, door: str) -> None:
    # before: two calls on /v1/responses (the null one, incomplete, and the next), and an
    # `api_error` ending the stream on /v1/messages
    tool = tool_for(
        door, chat="read", responses="exec_command", messages="Read", gemini="read_file"
    )
    good = {{"chat": "filePath", "responses": "cmd"}.get(family(door), "file_path"): "a"}
    gw.upstream.add(Reply(tool_calls=[(tool.name, "null")]), Reply(tool_calls=[(tool.name, good)]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [good] and seen.shown == 1 and seen.error is None
    assert "the arguments are null, not an object" in asked_again(gw)


@pytest.mark.parametrize("door", ["gemini_openapi", "gemini_openapi_stream"])
async def test_gemini_int64_limits_written_as_strings_are_checked(
    gw: AppGateway, door: str
) -> None:
    # Gemini's `Schema` types `minItems`, `maxLength`... int64, which proto JSON (and Google's
    # JS SDK) writes as a string: `"minItems": "1"`. Before, such a tool compiled to no schema
    # and its calls went unchecked.
    listing = gemini_cli("list_directory")
    schema = json.loads(json.dumps(listing.schema))
    schema["properties"]["ignore"]["minItems"] = 1  # `openapi` sends it as "1"
    tool = Tool(listing.name, schema, listing.description)
    gw.upstream.add(
        Reply(tool_calls=[(tool.name, {"dir_path": "src", "ignore": []})]),  # too few
        Reply(tool_calls=[(tool.name, {"dir_path": "src", "ignore": '["*.pyc"]'})]),  # repaired
    )
    seen = await ask(gw, door, tool)
    assert seen.arguments == [{"dir_path": "src", "ignore": ["*.pyc"]}] and seen.shown == 1
    assert "at $.ignore: [] has less than 1 item" in asked_again(gw)


@pytest.mark.parametrize("door", DOORS)
async def test_a_second_misfit_in_a_row_reaches_the_client_as_written(
    gw: AppGateway, door: str
) -> None:
    # asked again once; the client's own validation answers the model after that
    tool = tool_for(door, chat="read", responses="view_image", messages="Read", gemini="read_file")
    gw.upstream.add(Reply(tool_calls=[(tool.name, "{}")]), Reply(tool_calls=[(tool.name, "{ }")]))
    seen = await ask(gw, door, tool)
    assert seen.arguments == [{}] and seen.shown == 1 and seen.error is None
    if family(door) not in ("messages", "gemini"):  # as written (Messages, Gemini: an object)
        assert [text for _, _, text in seen.calls] == ["{ }"]
    assert len(gw.upstream.chat_requests) == 2


# -- salvaged from leaked text ----------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def salvaging_gateway() -> AsyncIterator[AppGateway]:
    from toolwire.loop.state import LoopSettings

    salvage = LoopSettings(leak_mode="salvage")
    async with app_gateway(ScriptedUpstream.in_process(), settings=salvage) as gateway:
        yield gateway


@pytest.fixture
def salvaging(salvaging_gateway: AppGateway) -> AppGateway:
    salvaging_gateway.upstream.reset()
    return salvaging_gateway


def leaked(name: str, arguments: dict[str, Any]) -> str:
    """A turn that writes its call as text (Hermes' markup, the parser off), after prose."""
    call = json.dumps({"name": name, "arguments": arguments})
    return f"Let me look.\n<tool_call>\n{call}\n</tool_call>"


def unmarked(seen: Seen) -> None:
    """Nothing of the leaked text reached the client, only the prose before it."""
    assert "<tool_call>" not in seen.body and "Let me look." in seen.body


@pytest.mark.parametrize("door", DOORS)
async def test_a_salvaged_call_is_repaired(salvaging: AppGateway, door: str) -> None:
    # before: a call read from leaked text went to the client unchecked, `"5"` and all
    tool = tool_for(
        door, chat="read", responses="exec_command", messages="Read", gemini="read_file"
    )
    path = {"chat": "filePath", "responses": "cmd"}.get(family(door), "file_path")
    number = {"responses": "max_output_tokens", "gemini": "start_line"}.get(family(door), "limit")
    salvaging.upstream.add(Reply(text=leaked(tool.name, {path: "/src/a.py", number: "5"})))
    seen = await ask(salvaging, door, tool)
    assert seen.arguments == [{path: "/src/a.py", number: 5}] and seen.shown == 1
    assert seen.error is None and len(salvaging.upstream.chat_requests) == 1
    unmarked(seen)


@pytest.mark.parametrize("door", DOORS)
async def test_a_salvaged_call_that_does_not_fit_is_asked_again_unseen(
    salvaging: AppGateway, door: str
) -> None:
    tool = tool_for(
        door, chat="read", responses="exec_command", messages="Read", gemini="read_file"
    )
    path = {"chat": "filePath", "responses": "cmd"}.get(family(door), "file_path")
    number = {"responses": "max_output_tokens", "gemini": "start_line"}.get(family(door), "limit")
    salvaging.upstream.add(
        Reply(text=leaked(tool.name, {number: 5})),  # no path: a required property missing
        Reply(text=leaked(tool.name, {path: "/src/a.py", number: 5})),
    )
    seen = await ask(salvaging, door, tool)
    assert seen.arguments == [{path: "/src/a.py", number: 5}] and seen.shown == 1
    assert seen.error is None
    if door not in ("responses_stream", "websocket"):  # (events there repeat the text)
        assert seen.body.count("Let me look.") == 1  # the retry's prose is shown once
    unmarked(seen)
    second = salvaging.upstream.chat_requests[1].body["messages"]
    (turn,) = [m for m in second if m["role"] == "assistant"]
    assert turn["content"] == "Let me look." and len(turn["tool_calls"]) == 1  # its call, read
    assert f'at $: "{path}" is a required property' in asked_again(salvaging)


@pytest.mark.parametrize("door", DOORS)
async def test_a_salvaged_xml_parameter_is_typed_by_the_schema(
    salvaging: AppGateway, door: str
) -> None:
    # Qwen3-Coder's XML parameters are text: `{"a": 1}` is a file's content where the tool
    # wants a string, a number where it wants a number (before: an object, then a re-ask)
    name, written, meant = {
        "chat": ("write", {"filePath": "/a.json", "content": '{"a": 1}'}, None),
        "responses": ("write_stdin", {"session_id": "7", "chars": "3"}, {"session_id": 7}),
        "messages": ("Write", {"file_path": "/a.json", "content": '{"a": 1}'}, None),
        "gemini": ("write_file", {"file_path": "/a.json", "content": '{"a": 1}'}, None),
    }[family(door)]
    tool = tool_for(door, chat=name, responses=name, messages=name, gemini=name)
    parameters = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in written.items())
    leak = f"Let me look.\n<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"
    salvaging.upstream.add(Reply(text=leak))
    seen = await ask(salvaging, door, tool)
    assert seen.arguments == [{**written, **(meant or {})}] and seen.shown == 1
    assert len(salvaging.upstream.chat_requests) == 1
    assert "<function=" not in seen.body


# -- untouched -------------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
async def test_a_call_that_fits_passes_byte_for_byte(gw: AppGateway, door: str) -> None:
    tool = tool_for(
        door, chat="bash", responses="exec_command", messages="Bash", gemini="run_shell_command"
    )
    key = "cmd" if family(door) == "responses" else "command"
    # odd spacing, a \u escape and key order: what a re-encoding would change
    raw = f'{{ "{key}":"ls  -la caf\\u00e9" ,"description" : "List files"}}'
    if family(door) == "responses":
        raw = f'{{ "{key}":"ls  -la caf\\u00e9" ,"workdir" : "/src"}}'
    gw.upstream.add(Reply(tool_calls=[(tool.name, raw)], call_ids=["functions.Bash:0"]))
    seen = await ask(gw, door, tool)
    ((name, call_id, text),) = seen.calls
    assert name == tool.name and call_id == "functions.Bash:0"  # the model's id, verbatim
    if door == "messages" or family(door) == "gemini":  # an object, not text: as written
        assert list(orjson.loads(text).items()) == list(orjson.loads(raw).items())
    else:
        assert text == raw


@pytest.mark.parametrize("door", ["chat", "responses", "messages", "gemini"])
async def test_kimi_call_ids_go_out_and_come_back_verbatim(gw: AppGateway, door: str) -> None:
    # Kimi-K2 numbers its calls `functions.<name>:<idx>` and relies on them in later turns
    tool = tool_for(door, chat="read", responses="view_image", messages="Read", gemini="read_file")
    path = {"chat": "filePath", "responses": "path"}.get(family(door), "file_path")
    call_id = f"functions.{tool.name}:0"
    gw.upstream.add(
        Reply(tool_calls=[(tool.name, {path: "a"})], call_ids=[call_id]), Reply(text="done")
    )
    seen = await ask(gw, door, tool)
    assert [c[1] for c in seen.calls] == [call_id]
    if door == "chat":
        history = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool.name, "arguments": seen.calls[0][2]},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "hello"},
        ]
        body = {
            "model": "m",
            "messages": history,
            "tools": [
                {"type": "function", "function": {"name": tool.name, "parameters": tool.schema}}
            ],
        }
        assert (await gw.http.post("/v1/chat/completions", json=body)).status_code == 200
    elif door == "responses":
        output = {"type": "function_call_output", "call_id": call_id, "output": "hello"}
        body = responses_body(tool)
        body["input"] = [
            {
                "type": "function_call",
                "call_id": call_id,
                "name": tool.name,
                "arguments": seen.calls[0][2],
            },
            output,
        ]
        assert (await gw.http.post("/v1/responses", json=body)).status_code == 200
    elif door == "gemini":
        call = {"id": call_id, "name": tool.name, "args": orjson.loads(seen.calls[0][2])}
        answer = {"id": call_id, "name": tool.name, "response": {"output": "hello"}}
        contents = [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": call}]},
            {"role": "user", "parts": [{"functionResponse": answer}]},
        ]
        declaration = {"name": tool.name, "parametersJsonSchema": tool.schema}
        body = {"contents": contents, "tools": [{"functionDeclarations": [declaration]}]}
        path = "/v1beta/models/gemini-2.5-pro:generateContent"
        assert (await gw.http.post(path, json=body)).status_code == 200
    else:
        history = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": call_id, "name": tool.name, "input": {path: "a"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "hello"}],
            },
        ]
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": history,
            "tools": [{"name": tool.name, "input_schema": tool.schema}],
        }
        assert (await gw.http.post("/v1/messages", json=body)).status_code == 200
    sent = gw.upstream.chat_requests[-1].body["messages"]
    called = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert called == answered == [call_id]


# -- recorded, and switched off ---------------------------------------------------------------


def metric(text: str, name: str, label: str) -> float:
    """A counter's value in `/metrics` text (0 when it has not counted yet)."""
    for line in text.splitlines():
        if line.startswith(f"{name}_total{{{label}}}"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_repairs_and_re_asks_are_on_the_timeline_metrics_and_ui(tmp_path: Path) -> None:
    from tests.inprocess.test_operator import served

    read = claude("Read")
    tools = [{"type": "function", "name": "Read", "parameters": read.schema}]

    async def respond(s: Any) -> dict[str, Any]:
        body = {"model": "m", "input": "go", "tools": tools}
        answer = await s.http.post("/v1/responses", json=body)
        assert answer.status_code == 200, answer.text
        return dict((await s.http.get(f"/ui/api/responses/{answer.json()['id']}")).json())

    async with served(f"sqlite:///{tmp_path / 't.db'}") as s:
        before = (await s.http.get("/metrics")).text
        s.upstream.add(Reply(tool_calls=[("Read", {"file_path": "a", "limit": "5"})]))
        repaired = await respond(s)
        s.upstream.add(
            Reply(tool_calls=[("Read", "{}")]), Reply(tool_calls=[("Read", {"file_path": "a"})])
        )
        reasked = await respond(s)
        s.upstream.add(Reply(tool_calls=[("Read", "{}")]), Reply(tool_calls=[("Read", "{}")]))
        passed = await respond(s)
        after = (await s.http.get("/metrics")).text
        overview = (await s.http.get("/ui/api/overview")).json()

    def entries(found: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        return [e for e in found["timeline"] if e["type"] == kind]

    (fixed,) = entries(repaired, "arguments_repaired")
    assert (fixed["name"], fixed["kind"], fixed["path"]) == ("Read", "numeric_string", "$.limit")
    ((misfit,),) = [entries(reasked, "arguments_misfit")]
    assert misfit["action"] == "retry" and '"file_path" is a required property' in misfit["error"]
    assert [e["action"] for e in entries(passed, "arguments_misfit")] == ["retry", "passed"]
    assert passed["response"]["output"][0]["arguments"] == "{}"  # as the model wrote it
    kinds = overview["total"]["repairs_by_kind"]
    assert kinds["arguments_numeric_string"] == 1 and kinds["arguments_reasked"] == 2
    name, by_kind = "toolwire_argument_repairs", 'kind="numeric_string"'
    assert metric(after, name, by_kind) - metric(before, name, by_kind) == 1
    for action, count in (("retry", 2), ("passed", 1)):
        label = f'action="{action}"'
        grown = metric(after, "toolwire_argument_misfits", label)
        assert grown - metric(before, "toolwire_argument_misfits", label) == count


@pytest.mark.parametrize(
    "door", ["chat_stream", "responses_stream", "messages_stream", "gemini_stream"]
)
async def test_the_check_is_off_when_the_deployment_says_so(door: str) -> None:
    from toolwire.loop.state import LoopSettings

    off = LoopSettings(check_arguments=False)
    async with app_gateway(ScriptedUpstream.in_process(), settings=off) as gw:
        tool = tool_for(
            door, chat="read", responses="exec_command", messages="Read", gemini="read_file"
        )
        key = {"chat": "filePath", "responses": "cmd"}.get(family(door), "file_path")
        number = "start_line" if family(door) == "gemini" else "limit"
        raw = f'{{"{key}": "a", "{number}": "5"}}'
        gw.upstream.add(Reply(tool_calls=[(tool.name, raw)]))
        seen = await ask(gw, door, tool)
    # unchecked: as the model wrote it (Gemini: the same object, the string still a string)
    assert [orjson.loads(text) for _, _, text in seen.calls] == [orjson.loads(raw)]
    if family(door) != "gemini":
        assert [text for _, _, text in seen.calls] == [raw]


@pytest.mark.parametrize(
    ("version", "passed_on"), [(None, False), ("0.26.2", False), ("0.27.0", True)]
)
async def test_strict_is_asked_only_of_an_upstream_that_enforces_it(
    version: str | None, passed_on: bool
) -> None:
    # vLLM renders `strict` into the prompt before it enforces it (vllm #52741): elsewhere it
    # is dropped, and the gateway's check is the enforcement
    from toolwire.transcript import ToolSpec, UserMessage
    from toolwire.upstream.base import TurnRequest

    upstream = ScriptedUpstream.in_process(version=version)
    adapter = upstream.adapter()
    tool = codex("view_image")
    spec = ToolSpec(tool.name, tool.description, tool.schema, strict=True)
    upstream.add(Reply(text="a"), Reply(text="b"))
    for _ in range(2):  # the version is asked once
        turn = TurnRequest(model="m", transcript=[UserMessage("go")], tools=[spec])
        async for _event in adapter.stream_turn(turn):
            pass
    await adapter.aclose()
    sent = [r.body["tools"][0]["function"] for r in upstream.chat_requests]
    assert [f.get("strict") for f in sent] == [True if passed_on else None] * 2
    assert [r.path for r in upstream.requests].count("/version") == 1
    assert adapter.enforces_strict is passed_on
