"""Shared fixtures: real servers on loopback (`scripted`), and their in-process twins
(`fake_upstream`, `gateway_in_process`): the same scripts, no sockets."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from toolwire.testing import ScriptedUpstream

if TYPE_CHECKING:
    from tests.inprocess_gateway import AppGateway

DATA = Path(__file__).parent / "data"


def pytest_configure(config: pytest.Config) -> None:
    from tests import compat_matrix  # docs/compatibility.md, from the tests that ran

    compat_matrix.configure(config)


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


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[object]:
    """One PostgreSQL cluster for the session, started on loopback by the tests
    (`tests/postgres.py`); the tests that use it skip, saying why, where PostgreSQL is not
    installed (`.ci/run` installs it)."""
    from tests.postgres import Cluster

    try:
        cluster = Cluster().start()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        output = getattr(exc, "output", b"") or b""
        pytest.skip(f"no PostgreSQL cluster: {exc} {output.decode(errors='replace')[-500:]}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: object, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on the session's cluster."""
    from tests.postgres import Cluster

    assert isinstance(postgres_cluster, Cluster)
    name = "t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:16]
    return postgres_cluster.create_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL on each backend: a SQLite file, and a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'toolwire.db'}"
    return str(request.getfixturevalue("postgres_url"))
