"""A real `toolwire serve` process in front of a ScriptedUpstream, and the official client."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from tests.processes import free_port, toolwire_process
from toolwire.testing import ScriptedUpstream

SEARCH_SERVER = Path(__file__).parents[1] / "mcp_servers" / "search_server.py"


def search_backend_config(directory: Path) -> Path:
    """A `toolwire serve --config` file whose `web_search` and `web_fetch` are served by the
    test search backend (tests/mcp_servers/search_server.py, an MCP server over stdio)."""
    config = directory / "toolwire.yaml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "mcp_servers": [
                    {
                        "label": "searcher",
                        "command": sys.executable,
                        "args": [str(SEARCH_SERVER)],
                        # as an MCP server it would ask; as the search backend it does not
                        "require_approval": "always",
                    }
                ],
                "web_search": {"server": "searcher", "tool": "search"},
                "web_fetch": {"server": "searcher", "tool": "fetch"},
            }
        ),
        encoding="utf-8",
    )
    return config


class Gateway:
    def __init__(self, upstream: ScriptedUpstream, base_url: str, db: Path) -> None:
        self.upstream = upstream
        self.base_url = base_url
        self.db = db
        self.client = openai.OpenAI(base_url=base_url, api_key="sk-unused", max_retries=0)
        self.async_client = openai.AsyncOpenAI(
            base_url=base_url, api_key="sk-unused", max_retries=0
        )

    def reset(self) -> None:
        while self.upstream.remaining:
            self.upstream._turns.popleft()
        self.upstream.requests.clear()


@contextmanager
def running_gateway(db: Path, extra: tuple[str, ...] = ()) -> Iterator[Gateway]:
    """`toolwire serve` as a child process, with a 2 s upstream read timeout and one retry."""
    port = free_port()
    with ScriptedUpstream() as upstream:
        args = [
            "serve",
            "--upstream",
            upstream.base_url,
            "--db",
            f"sqlite:///{db}",
            "--port",
            str(port),
            "--tool",
            "toolwire.demo_tools:ALL",
            *extra,
        ]
        base = f"http://127.0.0.1:{port}"
        saved = {k: os.environ.get(k) for k in ("TOOLWIRE_READ_TIMEOUT", "TOOLWIRE_MAX_RETRIES")}
        os.environ.update({"TOOLWIRE_READ_TIMEOUT": "2", "TOOLWIRE_MAX_RETRIES": "1"})
        try:
            with toolwire_process(*args, health=base + "/health"):
                yield Gateway(upstream, base + "/v1", db)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("db") / "toolwire.db") as running:
        yield running


@pytest.fixture
def gw(gateway: Gateway) -> Gateway:
    gateway.reset()
    return gateway
