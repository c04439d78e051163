"""One `toolwire serve` process in front of three model servers on loopback (two serve
`model-a`, one `model-b`), started with one command: the start-up summary names each, the
model list is their union, a request goes to a server of its model, a session stays on one
server turn after turn, and a server that dies is taken out (its state in `/metrics` and on
`/ui`) without one request failing, then probed back in once it answers again."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.processes import free_port, output_so_far, toolwire_process, wait_until_up
from toolwire.config import load_config
from toolwire.server.main import build_app
from toolwire.testing import Reply, ScriptedUpstream

LOCAL = "http://127.0.0.1"
FAST = {
    "TOOLWIRE_UPSTREAM_PROBE_SECONDS": "0.3",
    "TOOLWIRE_CIRCUIT_COOLDOWN": "0.5",
    "TOOLWIRE_CONNECT_TIMEOUT": "2",
}


@dataclass
class Fleet:
    servers: dict[str, ScriptedUpstream]
    base: str
    process: Any
    client: openai.OpenAI

    def name(self, key: str) -> str:
        return f"127.0.0.1:{self.servers[key].port}"

    def served(self) -> dict[str, int]:
        return {key: len(server.chat_requests) for key, server in self.servers.items()}

    def reset(self) -> None:
        for server in self.servers.values():
            server.requests.clear()


def answering(key: str) -> Any:
    return lambda body: Reply(text=f"from {key}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    servers = {
        "a1": ScriptedUpstream(models=["model-a"], default=answering("a1")),
        "a2": ScriptedUpstream(models=["model-a"], default=answering("a2")),
        "b": ScriptedUpstream(models=["model-b"], default=answering("b")),
    }
    for server in servers.values():
        server.start()
    db = tmp_path_factory.mktemp("fleet") / "toolwire.db"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    upstreams = [arg for s in servers.values() for arg in ("--upstream", s.base_url)]
    args = ["serve", *upstreams, "--db", f"sqlite:///{db}", "--port", str(port)]
    args += ["--anthropic-model", "claude-sonnet-4-5=model-a"]
    try:
        with pytest.MonkeyPatch.context() as env:
            for key, value in FAST.items():
                env.setenv(key, value)
            with toolwire_process(*args, health=base + "/health") as process:
                client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
                yield Fleet(servers, base, process, client)
    finally:
        for server in servers.values():
            server.stop()


def test_the_start_up_summary_names_each_upstream_and_what_it_serves(fleet: Fleet) -> None:
    out = output_so_far(fleet.process)
    assert "upstreams: 3, routed by model" in out
    for key, model in (("a1", "model-a"), ("a2", "model-a"), ("b", "model-b")):
        url = fleet.servers[key].base_url
        assert f"{fleet.name(key)} at {url}: {model} (up)" in out


def test_the_model_list_is_the_union_and_requests_go_to_a_server_of_their_model(
    fleet: Fleet,
) -> None:
    fleet.reset()
    listed = httpx.get(fleet.base + "/v1/models").json()["data"]
    assert sorted(m["id"] for m in listed) == ["model-a", "model-b"]
    anthropic = httpx.get(fleet.base + "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert [m["id"] for m in anthropic.json()["data"]][:1] == ["claude-sonnet-4-5"]
    for n in range(4):
        answer = fleet.client.chat.completions.create(
            model="model-b", messages=[{"role": "user", "content": f"question {n}"}]
        )
        assert answer.choices[0].message.content == "from b"
    assert fleet.served() == {"a1": 0, "a2": 0, "b": 4}
    with pytest.raises(openai.NotFoundError) as refused:
        fleet.client.responses.create(model="model-z", input="hi")
    assert "model-a, model-b" in str(refused.value)


def test_a_session_stays_on_one_server_turn_after_turn(fleet: Fleet) -> None:
    for session in range(4):
        fleet.reset()
        history: list[Any] = [
            {"role": "system", "content": f"You are agent {session}. " * 50},
            {"role": "user", "content": "start the task"},
        ]
        for turn in range(5):
            answer = fleet.client.chat.completions.create(model="model-a", messages=history)
            history += [
                {"role": "assistant", "content": answer.choices[0].message.content},
                {"role": "user", "content": f"turn {turn}"},
            ]
        served = fleet.served()
        assert sorted([served["a1"], served["a2"]]) == [0, 5], served


def state_of(fleet: Fleet, key: str) -> str:
    rows = httpx.get(fleet.base + "/ui/api/upstreams").json()["upstreams"]
    return str(next(row["state"] for row in rows if row["name"] == fleet.name(key)))


def test_a_dead_server_is_taken_out_without_a_failed_request_and_probed_back_in(
    fleet: Fleet,
) -> None:
    a1 = fleet.servers["a1"]
    port = a1.port
    a1.stop()
    try:
        for n in range(12):  # distinct sessions: about half hash to the dead one
            answer = fleet.client.chat.completions.create(
                model="model-a", messages=[{"role": "user", "content": f"after the death {n}"}]
            )
            assert answer.choices[0].message.content == "from a2"
        assert state_of(fleet, "a1") == "open"
        metrics = httpx.get(fleet.base + "/metrics").text
        name = re.escape(fleet.name("a1"))
        assert re.search(rf'toolwire_upstream_state\{{upstream="{name}"\}} 2\.0', metrics)
        assert re.search(rf'toolwire_upstream_failures_total\{{upstream="{name}"\}} [1-9]', metrics)
        assert re.search(r'toolwire_upstream_routed_total\{reason="failover",upstream=', metrics)
    finally:
        revived = ScriptedUpstream(models=["model-a"], port=port, default=answering("a1"))
        revived.start()
        fleet.servers["a1"] = revived
    deadline = time.monotonic() + 15
    while state_of(fleet, "a1") == "open":  # the probe finds it answering again
        assert time.monotonic() < deadline, "a1 was never probed back in"
        time.sleep(0.1)
    for n in range(40):
        fleet.client.chat.completions.create(
            model="model-a", messages=[{"role": "user", "content": f"back again {n}"}]
        )
        if revived.chat_requests:
            break
    assert revived.chat_requests and state_of(fleet, "a1") == "closed"


async def test_config_file_upstreams_with_models_and_weights(tmp_path: Path) -> None:
    """`upstreams:` in the config file: a server's `models` say what it serves (its own list
    is not asked for them), `weight` its share; the app `serve` builds from it, in process."""
    async with (
        ScriptedUpstream(models=["unlisted"], default=answering("x")) as x,
        ScriptedUpstream(models=["model-y"], default=answering("y")) as y,
    ):
        config = tmp_path / "toolwire.yaml"
        config.write_text(
            "upstreams:\n"
            f"  - url: {x.base_url}\n    name: big-x\n    models: [model-x]\n    weight: 3\n"
            f"  - url: {y.base_url}\n    name: small-y\n"
            f"db: sqlite:///{tmp_path / 'db.sqlite'}\n"
            "upstream_probe_seconds: 0\n"
        )
        app = await build_app(load_config(config, {}))
        async with (
            app.router.lifespan_context(app),  # start-up and shutdown, as uvicorn runs them
            httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=LOCAL) as http,
        ):
            listed = (await http.get("/v1/models")).json()["data"]
            answer = await http.post(
                "/v1/chat/completions",
                json={"model": "model-x", "messages": [{"role": "user", "content": "hi"}]},
            )
    assert sorted(m["id"] for m in listed) == ["model-x", "model-y"]
    assert answer.json()["choices"][0]["message"]["content"] == "from x"
    assert f"    - big-x at {x.base_url}: model-x (up, weight 3)" in app.state.summary
    assert f"    - small-y at {y.base_url}: model-y (up)" in app.state.summary


def test_make_fleet_serves_two_models_from_three_servers_and_stops_them(tmp_path: Path) -> None:
    """`make fleet` (README): one command, three model servers, toolwire in front; SIGTERM
    (as Ctrl-C) leaves no server behind."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    demo = Path(__file__).resolve().parents[2] / "benchmarks" / "fleet_demo.py"
    env = {**os.environ, "TOOLWIRE_DB": f"sqlite:///{tmp_path / 'toolwire.db'}"}
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, str(demo), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            wait_until_up(base + "/health", process)
            listed = httpx.get(base + "/v1/models").json()
            assert sorted(model["id"] for model in listed["data"]) == ["model-a", "model-b"]
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
            answer = client.chat.completions.create(
                model="model-b", messages=[{"role": "user", "content": "hi"}]
            )
            assert (answer.choices[0].message.content or "").startswith("Answer ")
            with pytest.raises(openai.NotFoundError, match="model-a, model-b"):
                client.chat.completions.create(
                    model="model-c", messages=[{"role": "user", "content": "hi"}]
                )
            servers = [int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)/v1", log.read_text())[:3]]
            assert len(servers) == 3
        finally:
            process.terminate()
            process.wait(20)
    assert process.returncode == 0, log.read_text()[-2000:]  # toolwire stopped cleanly
    for server in servers:  # every mock server stopped with it
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server), timeout=1).close()
