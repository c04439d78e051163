"""A real `toolwire serve` process in front of a ScriptedUpstream, and the official client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.processes import free_port, toolwire_process
from toolwire.testing import ScriptedUpstream


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


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    db = tmp_path_factory.mktemp("db") / "toolwire.db"
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
        ]
        base = f"http://127.0.0.1:{port}"
        import os

        os.environ["TOOLWIRE_READ_TIMEOUT"] = "2"
        os.environ["TOOLWIRE_MAX_RETRIES"] = "0"
        try:
            with toolwire_process(*args, health=base + "/health"):
                yield Gateway(upstream, base + "/v1", db)
        finally:
            os.environ.pop("TOOLWIRE_READ_TIMEOUT")
            os.environ.pop("TOOLWIRE_MAX_RETRIES")


@pytest.fixture
def gw(gateway: Gateway) -> Gateway:
    gateway.reset()
    return gateway
