"""An agent served by toolwire explores and edits a repository through the workspace tools, and
the same tools answer any MCP client through `toolwire mcp-serve`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters, types

from tests.integration.conftest import Gateway, running_gateway
from toolwire.testing import Reply


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "src").mkdir()
    (root / "src" / "find.ts").write_text(
        "export const isTs = /\\.ts$/;\n// TODO: handle .tsx\n", encoding="utf-8"
    )
    (root / "src" / "main.py").write_text("print('hello')\n", encoding="utf-8")
    (root / ".gitignore").write_text("build/\n", encoding="utf-8")
    (root / "build").mkdir()
    (root / "build" / "out.ts").write_text("// TODO generated\n", encoding="utf-8")
    if os.geteuid() == 0:  # as root, exec runs as the workspace's owner: an unprivileged one
        for path in [root, *root.rglob("*")]:
            os.chown(path, 65534, 65534)
    return root


@pytest.fixture(scope="module")
def ws_gateway(tmp_path_factory: pytest.TempPathFactory, repo: Path) -> Iterator[Gateway]:
    home = tmp_path_factory.mktemp("wsgw")
    config = home / "toolwire.yaml"
    config.write_text(
        json.dumps({"workspace": {"root": str(repo), "allow_write": True, "allow_exec": True}})
    )
    with running_gateway(home / "toolwire.db", ("--config", str(config))) as gateway:
        yield gateway


@pytest.fixture
def wg(ws_gateway: Gateway) -> Gateway:
    ws_gateway.reset()
    return ws_gateway


def outputs(response: object) -> dict[str, str]:
    return {
        item.name: item.output or item.error for item in response.output if item.type == "mcp_call"
    }  # type: ignore[attr-defined]


def test_agent_explores_and_edits_a_repository(wg: Gateway, repo: Path) -> None:
    wg.upstream.add(
        Reply(tool_calls=[("find", {"pattern": "**/*.ts"})]),
        Reply(tool_calls=[("grep", {"pattern": "TODO"})]),
        Reply(tool_calls=[("read_file", {"path": "src/find.ts"})]),
        Reply(
            tool_calls=[
                ("edit_file", {"path": "src/find.ts", "old": "/\\.ts$/", "new": "/\\.tsx?$/"})
            ]
        ),
        Reply(text="Done: the regex now matches .tsx too."),
    )
    response = wg.client.responses.create(model="m", input="Fix the TODO in the TypeScript code.")
    assert response.status == "completed", response.incomplete_details
    seen = outputs(response)
    assert seen["find"] == "src/find.ts"  # build/ is gitignored
    assert seen["grep"] == "src/find.ts:2:// TODO: handle .tsx"
    assert seen["read_file"].splitlines()[0].endswith("1\texport const isTs = /\\.ts$/;")
    assert (
        (repo / "src" / "find.ts")
        .read_text(encoding="utf-8")
        .startswith("export const isTs = /\\.tsx?$/;")
    )
    read_result = wg.upstream.chat_requests[3].body["messages"][-1]["content"]
    assert (
        "/\\.ts$/" in read_result and "\\\\.ts$" not in read_result
    )  # one backslash, byte for byte
    assert read_result.startswith("status:\nsuccess\n\ntoolName:\nread_file\n")


def test_exec_is_approval_gated_by_default(wg: Gateway, repo: Path) -> None:
    wg.upstream.add(Reply(tool_calls=[("exec", {"command": "ls src"})]))
    asking = wg.client.responses.create(model="m", input="list src")
    request = next(item for item in asking.output if item.type == "mcp_approval_request")
    assert (request.name, request.server_label) == ("exec", "toolwire")
    wg.upstream.add(Reply(text="find.ts and main.py"))
    approved = wg.client.responses.create(
        model="m",
        previous_response_id=asking.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        ],
    )
    run = next(item for item in approved.output if item.type == "mcp_call")
    assert run.name == "exec" and "exitCode: 0" in (run.output or "")
    assert "find.ts" in (run.output or "") and "main.py" in (run.output or "")


async def test_mcp_serve_answers_the_official_mcp_client(repo: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolwire", "mcp-serve", "--root", str(repo)]
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"read_file", "find", "grep", "search_files", "pipe", "preview_edit"} <= names
        assert "exec" not in names and "edit_file" not in names  # read-only unless allowed
        result = await client.call_tool("read_file", {"path": "src/main.py"})
        text = result.content[0]
        assert isinstance(text, types.TextContent)
        assert text.text == "     1\tprint('hello')"
        escape = await client.call_tool("read_file", {"path": "../../etc/passwd"})
        assert escape.is_error
