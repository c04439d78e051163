"""Two `toolwire serve` replicas on one real PostgreSQL, each routing over the same two model
servers: a session's continuation (`previous_response_id`, `conversation`) sent to either
replica goes to the model server that served its previous turn, read from the store, even
where that replica's own policy would send a new session elsewhere.

Server `b` weighs 1000 to `a`'s 1, so every new session hashes to `b`; `b` refuses the first
turn of the sessions under test (HTTP 503), so `a` serves them (failover). A replica that did
not remember where they went would send their next turn to `b`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.postgres import Cluster
from tests.processes import free_port, toolwire_process, wait_until_up
from toolwire.testing import Body, Reply, ScriptedUpstream

FIRST = "first turn"


def b_turn(body: Any) -> Any:
    said = str(body.get("messages") if isinstance(body, dict) else body)
    if FIRST in said and "go on" not in said:
        return Body({"error": {"message": "busy"}}, status=503)
    return Reply(text="from b")


@dataclass
class Replicas:
    one: openai.OpenAI
    two: openai.OpenAI


@pytest.fixture(scope="module")
def replicas(
    postgres_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    url = postgres_cluster.create_database("fleet_replicas")
    folder: Path = tmp_path_factory.mktemp("fleet")
    with (
        ScriptedUpstream(models=["m"], default=Reply(text="from a")) as a,
        ScriptedUpstream(models=["m"], default=b_turn) as b,
        contextlib.ExitStack() as stack,
    ):
        config = folder / "toolwire.yaml"
        config.write_text(
            "upstreams:\n"
            f"  - url: {a.base_url}\n    name: a\n"
            f"  - url: {b.base_url}\n    name: b\n    weight: 1000\n"
        )
        clients = []
        for _ in range(2):  # both start at once; then each is waited for
            port = free_port()
            args = ["serve", "--config", str(config), "--db", url, "--port", str(port)]
            process = stack.enter_context(toolwire_process(*args))
            base = f"http://127.0.0.1:{port}"
            clients.append((base, process))
        for base, process in clients:
            wait_until_up(base + "/health", process)
        one, two = (
            openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0) for base, _ in clients
        )
        yield Replicas(one, two)


def test_a_continuation_on_the_other_replica_goes_to_the_server_that_served_it(
    replicas: Replicas,
) -> None:
    started = replicas.one.responses.create(model="m", input=FIRST)
    assert started.output_text == "from a"  # b refused it: a served
    new_session = replicas.two.responses.create(model="m", input="a new session")
    assert new_session.output_text == "from b"  # where the other replica sends new ones
    continued = replicas.two.responses.create(
        model="m", input="go on", previous_response_id=started.id
    )
    assert continued.output_text == "from a"
    again = replicas.one.responses.create(
        model="m", input="and on", previous_response_id=continued.id
    )
    assert again.output_text == "from a"


def test_a_conversation_stays_on_its_server_whichever_replica_serves_it(
    replicas: Replicas,
) -> None:
    conversation = replicas.one.conversations.create()
    started = replicas.one.responses.create(model="m", input=FIRST, conversation=conversation.id)
    assert started.output_text == "from a"
    for client in (replicas.two, replicas.one, replicas.two):
        turn = client.responses.create(model="m", input="go on", conversation=conversation.id)
        assert turn.output_text == "from a"
