"""The router's choices without I/O: which replicas a model's calls may go to, what a client
is told when none can take them, and what `/metrics` exports of each replica."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from toolwire.errors import NotFoundError, UpstreamError, UpstreamStreamError
from toolwire.loop.state import LoopRequest
from toolwire.observe import metrics
from toolwire.observe.fleet import COLLECTOR, add_to, watch_fleet
from toolwire.server.gate.quotas import QuotaUpstream
from toolwire.transcript import AssistantMessage, SystemMessage, ToolCall, UserMessage
from toolwire.upstream.base import RoutingHints, Sampling, TurnRequest, Upstream
from toolwire.upstream.events import FirstToken, Routed, TextDelta, ToolCallDone, ToolCallStarted
from toolwire.upstream.fleet.health import Health
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.resume import continuation, resumable
from toolwire.upstream.fleet.router import FleetRouter, FleetUnavailable, fleet_of
from toolwire.upstream.fleet.settings import FleetSettings, HealthSettings, ResumeMode


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def replica(name: str, models: list[str] | None, resume: ResumeMode = "auto") -> Replica:
    adapter: Upstream = None  # type: ignore[assignment]  # choose() never calls it
    health = Health(HealthSettings(failure_threshold=1, cooldown=10))
    built = Replica(name, adapter, resume=resume, health=health)
    if models is not None:
        built.take_listing([{"id": model} for model in models])
    return built


def turn(model: str, text: str = "hello", **hints: Any) -> TurnRequest:
    transcript = [SystemMessage("be brief"), UserMessage(text)]
    return TurnRequest(model, transcript, routing=RoutingHints(**hints))


def test_a_model_goes_only_to_the_replicas_that_serve_it() -> None:
    router = FleetRouter([replica("a", ["coder"]), replica("b", ["coder"]), replica("c", ["oss"])])
    assert {router.choose(turn("coder", f"s{n}"))[0].name for n in range(40)} == {"a", "b"}
    assert router.choose(turn("oss"))[0].name == "c"
    with pytest.raises(NotFoundError, match="the models served are: coder, oss"):
        router.check_model("llama")
    router.check_model("oss")


def test_while_a_replica_s_models_are_unknown_no_model_is_refused_up_front() -> None:
    router = FleetRouter([replica("a", ["coder"]), replica("b", None)])
    router.check_model("anything")  # b may serve it
    assert router.choose(turn("anything"))[0].name == "b"


def test_a_replica_out_of_the_circuit_is_skipped_and_none_left_says_when(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    a, b = replica("a", ["m"]), replica("b", ["m"])
    router = FleetRouter([a, b], clock=clock)
    a.health.failed(clock.now, "refused")
    assert {router.choose(turn("m", f"s{n}"))[0].name for n in range(20)} == {"b"}
    b.health.failed(clock.now, "refused")
    with pytest.raises(FleetUnavailable) as caught:
        router.choose(turn("m"))
    assert caught.value.status == 503 and caught.value.wait == pytest.approx(10)
    assert caught.value.headers == {"retry-after": "10"}
    # the client is told no more than that: which servers, and their states, are the log's
    assert caught.value.message == ("no model server for 'm' is available now; try again shortly")
    assert "a (open), b (open)" in caplog.text


def test_a_continuation_goes_only_to_replicas_that_can_continue() -> None:
    router = FleetRouter([replica("a", ["m"], resume="off"), replica("b", ["m"])])
    assert all(router.choose(turn("m", f"s{n}"), resuming=True)[0].name == "b" for n in range(20))
    only_off = FleetRouter([replica("a", ["m"], resume="off")])
    with pytest.raises(FleetUnavailable, match="can continue a cut answer"):
        only_off.choose(turn("m"), resuming=True)


def test_a_turn_that_failed_somewhere_avoids_it_unless_nothing_else_is_left() -> None:
    router = FleetRouter([replica("a", ["m"]), replica("b", ["m"])])
    assert router.choose(turn("m", avoid=frozenset({"a"})))[0].name == "b"
    assert router.choose(turn("m", avoid=frozenset({"a", "b"})))[0].name in {"a", "b"}


def test_the_router_is_found_behind_the_quota_layer() -> None:
    router = FleetRouter([replica("a", ["m"])], FleetSettings())
    wrapped = QuotaUpstream(router, None)  # type: ignore[arg-type]  # never reserves here
    assert fleet_of(wrapped) is router and fleet_of(object()) is None


def test_metrics_export_each_replica_s_state_load_and_failures() -> None:
    clock = Clock()
    a, b = replica("a", ["m"]), replica("b", ["m"])
    router = FleetRouter([a, b], clock=clock)
    a.health.failed(clock.now, "refused")
    b.outstanding = 2
    b.health.succeeded(clock.now, ttft=0.25)
    registry = CollectorRegistry()
    add_to(registry)
    try:
        watch_fleet(router.status)
        text = generate_latest(registry).decode()
    finally:
        registry.unregister(COLLECTOR)
    assert 'toolwire_upstream_state{upstream="a"} 2.0' in text
    assert 'toolwire_upstream_state{upstream="b"} 0.0' in text
    assert 'toolwire_upstream_outstanding{upstream="b"} 2.0' in text
    assert 'toolwire_upstream_failures_total{upstream="a"} 1.0' in text
    assert 'toolwire_upstream_error_rate{upstream="a"} 1.0' in text
    assert 'toolwire_upstream_ttft_average_seconds{upstream="b"} 0.25' in text


def test_a_structured_answer_is_never_resumed_and_a_resumed_one_writes_what_is_left() -> None:
    plain = turn("m")
    assert resumable(plain)
    for sampling in (
        Sampling(response_format={"type": "json_object"}),
        Sampling(response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
        Sampling(extra_body={"guided_json": {"type": "object"}}),
        Sampling(extra_body={"grammar": 'root ::= "a"'}),
        Sampling(extra_body={"structured_outputs": {"regex": "a+"}}),
    ):
        assert not resumable(replace(plain, sampling=sampling)), sampling
    assert resumable(replace(plain, sampling=Sampling(response_format={"type": "text"})))
    assert not resumable(replace(plain, tool_choice="required"))
    assert not resumable(replace(plain, tool_choice={"type": "function", "name": "f"}))
    limited = replace(
        plain, sampling=Sampling(max_output_tokens=100, extra_body={"max_completion_tokens": 3})
    )
    resumed = continuation(limited, "x" * 40, "prefill")  # 10 tokens, as metering estimates
    assert resumed.sampling.max_output_tokens == 90
    assert resumed.sampling.extra_body == {"max_completion_tokens": 1}  # never below 1
    assert resumed.transcript[-1] == AssistantMessage("x" * 40)


class Scripted:
    """An adapter that answers with these batches, then fails with `cut` if given."""

    name = "scripted"

    def __init__(self, batches: list[list[Any]], cut: UpstreamError | None = None) -> None:
        self.batches = batches
        self.cut = cut
        self.calls = 0

    async def stream_turn_batches(self, request: TurnRequest) -> AsyncIterator[list[Any]]:
        self.calls += 1
        for batch in self.batches:
            yield batch
        if self.cut is not None:
            raise self.cut


async def test_a_turn_cut_after_a_call_is_not_continued_whatever_text_followed_the_call() -> None:
    """The router stops reading a call's events once its first token and a tool call have
    come: the text after the call must not make the cut turn a continuation."""
    clock = Clock()
    call = ToolCall("call_1", "f", {}, "{}")
    first = Scripted(
        [
            [FirstToken(), TextDelta("let me look"), ToolCallStarted(0, "call_1", "f")],
            [ToolCallDone(0, call), TextDelta(" and more")],
        ],
        UpstreamStreamError("cut"),
    )
    second = Scripted([[TextDelta("never asked")]])
    fleet = FleetRouter(
        [
            Replica("r0", first, health=Health(HealthSettings())),  # type: ignore[arg-type]
            Replica("r1", second, health=Health(HealthSettings())),  # type: ignore[arg-type]
        ],
        FleetSettings(failover_backoff=0.001, failover_max_backoff=0.002),
        clock=clock,
    )
    request = turn("m")
    fleet.replicas[1].outstanding = 5  # busy: the turn is placed on r0
    seen: list[Any] = []
    with pytest.raises(UpstreamStreamError) as raised:
        async for batch in fleet.stream_turn_batches(request):
            seen.extend(batch)
    assert first.calls == 1 and second.calls == 0  # not continued, not made again here
    assert raised.value.replica == "r0" and raised.value.failover  # the loop may ask again
    assert [type(e).__name__ for e in seen][:2] == ["Routed", "FirstToken"]


def test_each_routed_call_counts_under_its_upstream_and_reason_the_cap_holding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`/metrics`' `toolwire_upstream_routed`: every `Routed` counts once, its upstream's
    label capped as every request-chosen label is (kept children included)."""
    monkeypatch.setattr(metrics, "UPSTREAM_LABEL", metrics.LabelCap(limit=1))
    monkeypatch.setattr(metrics, "_ROUTED_CHILDREN", {})

    def count(upstream: str, reason: str) -> float:
        labels = {"upstream": upstream, "reason": reason}
        return REGISTRY.get_sample_value("toolwire_upstream_routed_total", labels) or 0.0

    before = {key: count(*key) for key in (("fleet-a", "prompt"), ("other", "session"))}
    run = metrics.RunMetrics(LoopRequest(model="m", input=[]), "fleet", {})
    for _ in range(3):
        run(Routed("fleet-a", "prompt"))
    assert count("fleet-a", "prompt") == before["fleet-a", "prompt"] + 3
    for _ in range(2):
        run(Routed("fleet-b", "session"))  # past the cap of one upstream name
        assert run._upstream == "other"
    assert count("other", "session") == before["other", "session"] + 2
    assert count("fleet-b", "session") == 0.0
