"""The issue's "done when", end to end: an operator gives two teams keys with different limits
and budgets (`toolwire keys create`), runs two `toolwire serve` replicas on one PostgreSQL,
watches both teams spend through either replica until each is refused with a clean 429, and
sees on `/ui`'s JSON what toolwire repaired for each team."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from tests.minutes import start_in_a_fresh_minute_if_needed
from tests.postgres import Cluster
from tests.processes import free_port, toolwire_process
from toolwire.testing import Chunks, Reply, ScriptedUpstream

USAGE = {"prompt_tokens": 150, "completion_tokens": 50, "total_tokens": 200}


def whole_call() -> Chunks:
    """A tool call in one delta, which the assembler repairs (`whole_call_one_delta`), and its
    usage."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    function = {"name": "lookup", "arguments": json.dumps({"q": "x"})}
    return Chunks(
        [
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "role": "assistant",
                            "tool_calls": [{**call, "function": function}],
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
            # its usage: a call that reports none is charged what toolwire counted, and the
            # budget used below is compared with the usage the responses report
            {"choices": [], "usage": USAGE},
        ]
    )


def key(url: str, name: str, *options: str) -> str:
    made = subprocess.run(
        [sys.executable, "-m", "toolwire", "keys", "create", name, "--db", url, *options],
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.strip()


@pytest.fixture(scope="module")
def cluster_url(postgres_cluster: Cluster) -> str:
    return postgres_cluster.create_database("two_teams")


@pytest.fixture(scope="module")
def replicas(cluster_url: str) -> Iterator[tuple[ScriptedUpstream, list[str], dict[str, str]]]:
    keys = {
        "ops": key(cluster_url, "ops", "--operator"),
        "a": key(cluster_url, "team-a", "--budget", "1000", "--budget-period", "day"),
        "b": key(cluster_url, "team-b", "--rpm", "4"),
    }
    with ScriptedUpstream() as upstream, ExitStack() as stack:
        bases = []
        for _ in range(2):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            args = ["serve", "--upstream", upstream.base_url, "--db", cluster_url]
            stack.enter_context(
                toolwire_process(*args, "--port", str(port), health=base + "/health")
            )
            bases.append(base)
        yield upstream, bases, keys


def post(base: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        base + "/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}, timeout=30
    )


def test_two_teams_spend_get_refused_and_see_what_was_repaired(
    replicas: tuple[ScriptedUpstream, list[str], dict[str, str]],
) -> None:
    upstream, bases, keys = replicas
    start_in_a_fresh_minute_if_needed(30)  # team B's four requests a minute, counted below
    upstream.default = Reply(text="ok", usage=USAGE)
    body = {"model": "m", "input": "hi", "max_output_tokens": 64}
    # team A: a repaired stream first, then spend its daily budget through both replicas
    upstream.add(whole_call(), Reply(text="looked it up", usage=USAGE))
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    first = post(bases[0], keys["a"], {**body, "tools": tools})
    assert first.status_code == 200, first.text
    a_answers = [post(bases[n % 2], keys["a"], body) for n in range(12)]
    # team B: four requests a minute, whichever replica they reach
    b_answers = [post(bases[n % 2], keys["b"], body) for n in range(6)]
    upstream.default = None

    a_codes = [a.status_code for a in a_answers]
    assert 200 in a_codes and a_codes[-1] == 429, a_codes
    refused_a = next(a for a in a_answers if a.status_code == 429)
    assert refused_a.json()["error"]["code"] == "insufficient_quota"
    spent = sum(a.json()["usage"]["total_tokens"] for a in [first, *a_answers] if a.is_success)
    assert spent <= 1000 + USAGE["total_tokens"]
    assert [b.status_code for b in b_answers] == [200] * 4 + [429] * 2
    refused_b = b_answers[-1]
    assert refused_b.json()["error"] == {
        **refused_b.json()["error"],
        "code": "rate_limit_exceeded",
        "type": "requests",
    }
    assert refused_b.headers["x-ratelimit-limit-requests"] == "4"
    assert refused_b.headers["x-ratelimit-remaining-requests"] == "0"

    # the operator's view, from either replica: per team, what toolwire repaired
    ops = {"authorization": f"Bearer {keys['ops']}"}
    # (/ui gives its own replica's leases back before it reads; the other replica's unused
    # lease counts as taken until that replica gives it back, within a flush of going idle)
    for _ in range(40):
        listed = httpx.get(bases[1] + "/ui/api/keys", headers=ops).json()["data"]
        usage = {k["name"]: k["usage"] for k in listed}
        if usage["team-a"]["budget_used"] == spent:
            break
        time.sleep(0.1)
    ids = {k["name"]: k["id"] for k in listed}
    assert usage["team-a"]["budget_used"] == spent
    assert usage["team-b"]["requests_this_minute"] == 4

    def overview(team: str) -> dict[str, Any]:
        answer = httpx.get(f"{bases[1]}/ui/api/overview?key={ids[team]}", headers=ops)
        return dict(answer.json()["total"])

    a, b = overview("team-a"), overview("team-b")
    assert a["repairs_by_kind"].get("whole_call_one_delta") == 1
    assert b["repairs"] == 0 and b["responses"] == 4
    assert a["responses"] >= 1 + a_codes.count(200)  # (+ any refused at its model call)
    tenant = {"authorization": f"Bearer {keys['a']}"}
    assert httpx.get(bases[0] + "/metrics", headers=tenant).status_code == 403
    assert httpx.get(bases[0] + "/metrics", headers=ops).status_code == 200
