"""Two `toolwire serve` replicas on one real PostgreSQL (started by the tests): a cancel sent
to either stops a run on the other, a concurrent double approval runs its tool once, 64
concurrent streams lose nothing, and a background job whose replica is killed is finished by
the other, without running a tool again."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.postgres import Cluster
from tests.processes import free_port, toolwire_process
from toolwire.testing import Chunks, Reply, ScriptedUpstream

SLOW = {"choices": [{"index": 0, "delta": {"content": "…"}, "finish_reason": None}]}
FAST_LEASES = {
    "TOOLWIRE_LEASE_HEARTBEAT_SECONDS": "0.2",
    # Wide: on a loaded 2-core machine a heartbeat can be seconds late, and a live replica
    # taken for dead has its streams finalized `failed` under it. A killed replica is found
    # at once anyway (same host, its pid gone).
    "TOOLWIRE_LEASE_SECONDS": "10",
    "TOOLWIRE_QUEUE_POLL_SECONDS": "0.1",
}


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base: str
    client: openai.OpenAI


@dataclass
class Pair:
    upstream: ScriptedUpstream
    a: Server
    b: Server
    log: Path

    def ran(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture(scope="module")
def pair(postgres_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    url = postgres_cluster.create_database("replicas")
    log = tmp_path_factory.mktemp("tools") / "calls.log"
    with pytest.MonkeyPatch.context() as env, ScriptedUpstream() as upstream:
        for key, value in {**FAST_LEASES, "TOOLWIRE_TEST_TOOL_LOG": str(log)}.items():
            env.setenv(key, value)
        servers = []
        contexts = []
        for _ in range(2):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            args = ["serve", "--upstream", upstream.base_url, "--db", url, "--port", str(port)]
            context = toolwire_process(
                *args, "--tool", "tests.replica_tools:ALL", health=base + "/health"
            )
            process = context.__enter__()
            contexts.append(context)
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            servers.append(Server(process, base, client))
        try:
            yield Pair(upstream, servers[0], servers[1], log)
        finally:
            for context in reversed(contexts):
                context.__exit__(None, None, None)


def wait_for_status(client: openai.OpenAI, response_id: str, seconds: float = 15) -> str:
    deadline = time.monotonic() + seconds
    while True:
        status = client.responses.retrieve(response_id).status
        if status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return str(status)
        time.sleep(0.05)


def test_a_cancel_sent_to_either_replica_stops_the_run(pair: Pair) -> None:
    pair.upstream.add(Chunks([SLOW] * 300, delay=0.05))
    queued = pair.a.client.responses.create(model="m", input="long", background=True)
    deadline = time.monotonic() + 10
    while not pair.upstream.chat_requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pair.a.client.responses.retrieve(queued.id).status == "in_progress"
    started = time.monotonic()
    cancelled = pair.b.client.responses.cancel(queued.id)  # B does not run it: A does
    assert cancelled.status == "cancelled"
    assert time.monotonic() - started < 2
    assert pair.a.client.responses.retrieve(queued.id).status == "cancelled"
    assert pair.b.client.responses.cancel(queued.id).status == "cancelled"  # idempotent
    pair.upstream.reset()


def test_a_concurrent_double_approval_runs_the_tool_once(pair: Pair) -> None:
    pair.upstream.add(Reply(tool_calls=[("guarded_write", {"text": "once"})]))
    asking = pair.a.client.responses.create(model="m", input="write it")
    request = next(item for item in asking.output if item.type == "mcp_approval_request")
    pair.upstream.add(Reply(text="done"), Reply(text="done"))
    approval = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    barrier = threading.Barrier(2)
    answers: list[Any] = []

    def approve(server: Server) -> None:
        barrier.wait(5)
        answers.append(
            server.client.responses.create(
                model="m", previous_response_id=asking.id, input=[approval]
            )
        )

    threads = [threading.Thread(target=approve, args=(s,)) for s in (pair.a, pair.b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [a.status for a in answers] == ["completed", "completed"]
    assert pair.ran().count("guarded_write once") == 1
    pair.upstream.reset()


def test_64_concurrent_streams_across_replicas_lose_nothing(pair: Pair) -> None:
    count = 64
    pair.upstream.add(*[Reply(text=f"answer {n}") for n in range(count * 2)])

    async def run() -> list[tuple[str, str]]:
        gate = asyncio.Semaphore(count)
        async with httpx.AsyncClient(timeout=60) as http:

            async def one(n: int) -> tuple[str, str]:
                base = (pair.a if n % 2 else pair.b).base
                body = {"model": "m", "input": f"q{n}", "stream": True}
                async with gate:
                    response = await http.post(base + "/v1/responses", json=body)
                frames = [f for f in response.text.split("\n\n") if f.strip()]
                last = orjson.loads(frames[-1].split("data: ", 1)[1])
                return last["type"], last["response"]["id"]

            return await asyncio.gather(*[one(n) for n in range(count * 2)])

    finals = asyncio.run(run())
    assert [kind for kind, _ in finals] == ["response.completed"] * (count * 2)
    for n, (_, response_id) in enumerate(finals):
        client = (pair.b if n % 2 else pair.a).client  # read through the other replica
        assert client.responses.retrieve(response_id).status == "completed"


def test_a_background_job_of_a_killed_replica_is_finished_by_the_other(pair: Pair) -> None:
    pair.upstream.reset()
    pair.upstream.add(
        Reply(text="Step one.", tool_calls=[("note_step", {"text": "first"})]),
        Chunks([SLOW] * 300, delay=0.05),  # the second model call: A dies during it
        Reply(text="Finished by the other replica."),
    )
    queued = pair.a.client.responses.create(model="m", input="work", background=True)
    deadline = time.monotonic() + 15
    while len(pair.upstream.chat_requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(pair.upstream.chat_requests) == 2
    pair.a.process.send_signal(signal.SIGKILL)
    pair.a.process.wait(10)
    assert wait_for_status(pair.b.client, queued.id) == "completed"
    final = pair.b.client.responses.retrieve(queued.id)
    assert final.output_text.endswith("Finished by the other replica.")
    assert pair.ran().count("note_step first") == 1  # the step was not run again
    told = pair.upstream.chat_requests[-1].body["messages"]
    assert any(m["role"] == "tool" and "noted first" in m["content"] for m in told)
