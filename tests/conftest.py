"""Shared fixtures: real servers on loopback (`scripted`), and their in-process twins
(`fake_upstream`, `gateway_in_process`): the same scripts, no sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from toolwire.testing import ScriptedUpstream

if TYPE_CHECKING:
    from tests.inprocess_gateway import AppGateway

DATA = Path(__file__).parent / "data"


@pytest.fixture
def scripted() -> Iterator[ScriptedUpstream]:
    """A fresh ScriptedUpstream per test, on a real socket; script it with `.add(...)`."""
    with ScriptedUpstream() as upstream:
        yield upstream


@pytest.fixture
async def fake_upstream() -> AsyncIterator[ScriptedUpstream]:
    """A fresh in-process ScriptedUpstream per test: script it with `.add(...)`, reach it with
    `.adapter()` (a `ChatCompletionsUpstream`) or `.transport` (an httpx transport)."""
    async with ScriptedUpstream.in_process() as upstream:
        yield upstream


@pytest.fixture
async def gateway_in_process(fake_upstream: ScriptedUpstream) -> AsyncIterator[AppGateway]:
    """The toolwire app in process over `fake_upstream`, with `.http` (raw httpx) and
    `.client` (the official `openai.AsyncOpenAI`), both in process."""
    from tests.inprocess_gateway import app_gateway  # the server stack: only where it is used

    async with app_gateway(fake_upstream) as gateway:
        yield gateway
