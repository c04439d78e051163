"""The fleet's policy, health and configuration, as pure units: which replica a call goes to
(affinity with bounded load, round-robin, least outstanding), how the circuit breaker moves,
what a session is recognised by, and how `--upstream` given several times becomes a fleet."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from toolwire.config import load_config
from toolwire.errors import ConfigError
from toolwire.transcript import AssistantMessage, SystemMessage, UserMessage
from toolwire.upstream.base import Upstream
from toolwire.upstream.fleet.affinity import opening_key, session_key, session_of
from toolwire.upstream.fleet.health import CircuitState, Health
from toolwire.upstream.fleet.policy import SESSION_SECONDS, Selector, rendezvous
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.settings import HealthSettings, Policy


def replicas(count: int, **weights: float) -> list[Replica]:
    adapter: Upstream = None  # type: ignore[assignment]  # the policy never calls it
    names = [f"r{i}" for i in range(count)]
    return [Replica(name, adapter, weight=weights.get(name, 1.0)) for name in names]


# -- rendezvous hashing -----------------------------------------------------------------------


def test_removing_a_replica_moves_only_the_sessions_that_were_on_it() -> None:
    fleet = replicas(5)
    keys = range(4000)
    before = {key: rendezvous(key, fleet)[0].name for key in keys}
    after = {key: rendezvous(key, fleet[:2] + fleet[3:])[0].name for key in keys}
    moved = [key for key in keys if before[key] != after[key]]
    assert moved and all(before[key] == "r2" for key in moved)
    assert len(moved) == sum(1 for name in before.values() if name == "r2")
    shares = Counter(before.values())
    assert all(600 < shares[r.name] < 1000 for r in fleet), shares  # ~800 each


def test_a_heavier_replica_gets_its_weight_s_share_of_sessions() -> None:
    fleet = replicas(3, r0=2.0)
    shares = Counter(rendezvous(key, fleet)[0].name for key in range(8000))
    assert 3500 < shares["r0"] < 4500, shares  # 2 of 4


# -- the affinity policy ----------------------------------------------------------------------


def test_a_session_stays_on_its_replica_turn_after_turn() -> None:
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY)
    first, reason = selector.pick(fleet, key=123)
    assert reason == "prompt"
    for _ in range(5):
        again, reason = selector.pick(fleet, key=123)
        assert again is first and reason == "session"


def test_a_continuation_goes_where_its_previous_turn_went() -> None:
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY)
    hashed, _ = selector.pick(fleet, key=7)
    other = next(r for r in fleet if r is not hashed)
    chosen, reason = selector.pick(fleet, key=7, continues=other.name)
    assert chosen is other and reason == "continuation"
    # and the session remembers it: the next turn without the hint goes there too
    assert selector.pick(fleet, key=7)[0] is other


def test_affinity_yields_to_load_past_the_bound_and_the_session_stays_where_it_went() -> None:
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY, load_bound=1.25)
    home, _ = selector.pick(fleet, key=99)
    home.outstanding = 6  # the others idle: 6 in flight, its share is ceil(1.25 * 7 / 4) = 3
    moved, reason = selector.pick(fleet, key=99)
    assert moved is not home and reason == "load"
    home.outstanding = 0
    assert selector.pick(fleet, key=99) == (moved, "session")


def test_within_the_bound_affinity_holds_even_when_another_is_idler() -> None:
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY, load_bound=1.25)
    home, _ = selector.pick(fleet, key=5)
    for replica in fleet:
        replica.outstanding = 2
    home.outstanding = 3  # 9 in flight: room for ceil(1.25 * 10 / 4) = 4
    assert selector.pick(fleet, key=5)[0] is home


def test_an_idle_home_keeps_its_session_however_busy_the_others_are() -> None:
    """One call is within any share of the load: an idle replica never fails the bound
    (the policy does not sum the load for it)."""
    fleet = replicas(4, r1=0.25)
    selector = Selector(Policy.AFFINITY, load_bound=1.0)
    homes = {selector.pick(fleet, key=key)[0].name: key for key in range(64)}
    for replica in fleet:
        replica.outstanding = 1000
    for name, key in homes.items():
        home = next(r for r in fleet if r.name == name)
        home.outstanding = 0
        assert selector.pick(fleet, key=key) == (home, "session")
        home.outstanding = 1000


@pytest.mark.parametrize("count", [2, 3, 4, 8])
def test_a_flood_under_one_session_spreads_at_the_default_bound(count: int) -> None:
    """3 × a half share is more than all the calls: the bound must still bite with few
    replicas, or 200 calls under one session header all go to one of two."""
    fleet = replicas(count)
    selector = Selector(Policy.AFFINITY)  # the default bound (3)
    for _ in range(200):
        chosen, _ = selector.pick(fleet, key=session_key("flood"), keyed_by_session=True)
        chosen.outstanding += 1
    # no replica past halfway from its share to all of the load
    most = max(replica.outstanding for replica in fleet)
    assert most <= (1 + 1 / count) / 2 * 200 + 1
    assert sum(replica.outstanding > 0 for replica in fleet) >= 2


def test_a_heavier_replica_s_bound_is_below_the_whole_load_too() -> None:
    fleet = replicas(2, r1=3.0)  # r1's share is 3/4: 3 × 3/4 is more than all
    selector = Selector(Policy.AFFINITY)
    for _ in range(200):
        chosen, _ = selector.pick(fleet, key=session_key("flood"), keyed_by_session=True)
        chosen.outstanding += 1
    assert 0 < fleet[0].outstanding < fleet[1].outstanding


def test_busy_sessions_stay_on_their_replicas_at_the_default_bound() -> None:
    """The fleet benchmark's shape: 16 agent sessions at a time on 4 replicas, each with
    one call in flight or about to make its next; no session moves for load."""
    rng = random.Random(7)
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY)
    in_flight: dict[int, Replica] = {}
    reasons: Counter[str] = Counter()
    for step in range(2000):
        session = rng.randrange(16)
        if session in in_flight:
            in_flight.pop(session).outstanding -= 1  # its call ended
            continue
        chosen, why = selector.pick(fleet, key=session, keyed_by_session=True, now=step / 100)
        chosen.outstanding += 1
        in_flight[session] = chosen
        reasons[why] += 1
    assert reasons["load"] == 0 and reasons["session"] > 900


def test_a_quiet_fleet_still_spreads_new_sessions_and_forgets_idle_ones() -> None:
    """One call at a time (nothing in flight to balance): new sessions still spread, by the
    sessions each replica holds; sessions idle past `SESSION_SECONDS` stop counting."""
    fleet = replicas(4)
    selector = Selector(Policy.AFFINITY)
    homes = Counter(selector.pick(fleet, key=key, now=0.0)[0].name for key in range(400))
    assert sorted(homes.values()) == [100, 100, 100, 100]
    later = SESSION_SECONDS + 1
    assert selector.pick(fleet, key=5, now=later)[1] == "prompt"  # forgotten: placed anew
    assert len(selector._sessions) == 1


def test_round_robin_cycles_and_least_outstanding_takes_the_idlest() -> None:
    fleet = replicas(3)
    cycling = Selector(Policy.ROUND_ROBIN)
    picked = [cycling.pick(fleet, key=1)[0].name for _ in range(6)]
    assert picked[:3] == picked[3:] and sorted(picked[:3]) == ["r0", "r1", "r2"]
    least = Selector(Policy.LEAST_OUTSTANDING)
    fleet[0].outstanding, fleet[1].outstanding, fleet[2].outstanding = 3, 1, 2
    assert least.pick(fleet, key=1) == (fleet[1], "least_outstanding")


def test_the_sessions_remembered_are_bounded() -> None:
    fleet = replicas(2)
    selector = Selector(Policy.AFFINITY, kept=100)
    for key in range(1000):
        selector.pick(fleet, key=key)
    assert len(selector._sessions) == 100


# -- what a session is recognised by ----------------------------------------------------------


def test_the_prompt_opening_is_the_same_every_turn_and_differs_between_sessions() -> None:
    system = SystemMessage("You are a coding agent. " * 500)  # long: head, tail and length
    first = [system, UserMessage("fix the parser")]
    later = [*first, AssistantMessage("done"), UserMessage("now the tests")]
    assert opening_key(first) == opening_key(later) is not None
    assert opening_key([system, UserMessage("write the docs")]) != opening_key(first)
    edited = SystemMessage(system.text[:-10] + "Be brief. ")  # the tail differs
    assert opening_key([edited, UserMessage("fix the parser")]) != opening_key(first)
    assert opening_key([system]) is None


def test_session_headers_in_order_of_precedence() -> None:
    assert session_of({"session_id": "codex-1"}) == "codex-1"
    assert session_of({"x-claude-code-session-id": "cc", "session_id": "codex"}) == "cc"
    assert session_of({"x-session-affinity": "mine", "x-claude-code-session-id": "cc"}) == "mine"
    assert session_of({"x-other": "1"}) is None
    assert len(session_of({"session_id": "x" * 5000}) or "") == 256
    assert session_key("a") != session_key("b")


# -- health -----------------------------------------------------------------------------------


def test_the_circuit_opens_then_half_opens_for_one_trial_then_closes() -> None:
    health = Health(HealthSettings(failure_threshold=3, cooldown=10))
    for _ in range(2):
        health.failed(0.0, "refused")
    assert health.admits(0.0)  # two failures in a row: still in
    health.failed(1.0, "refused")
    assert health.state is CircuitState.OPEN and not health.admits(5.0)
    assert health.admits(11.0) and health.state is CircuitState.HALF_OPEN
    health.begin()
    assert not health.admits(11.5)  # one trial at a time
    health.succeeded(12.0, ttft=0.2)
    assert health.state is CircuitState.CLOSED and health.admits(12.0)


def test_a_failed_trial_opens_the_circuit_again() -> None:
    health = Health(HealthSettings(failure_threshold=1, cooldown=10))
    health.failed(0.0, "cut")
    assert health.admits(10.0)
    health.begin()
    health.failed(10.5, "cut again")
    assert health.state is CircuitState.OPEN and not health.admits(15.0)
    assert health.admits(20.5)


def test_probes_keep_a_dead_replica_out_and_let_a_revived_one_be_tried_at_once() -> None:
    health = Health(HealthSettings(failure_threshold=1, cooldown=10))
    health.failed(0.0, "refused")
    health.probe_failed(9.0, "refused")
    assert not health.admits(12.0)  # the probe at 9 s restarted the cool-down
    health.probe_answered(13.0)
    assert health.admits(13.0) and health.state is CircuitState.HALF_OPEN


def test_retry_after_keeps_a_replica_out_that_long_whatever_the_circuit() -> None:
    health = Health(HealthSettings(failure_threshold=5))
    health.failed(0.0, "429", retry_after=3.0)
    assert health.state is CircuitState.CLOSED
    assert not health.admits(2.9) and health.admits(3.1)
    assert health.error_rate(3.1) == 1.0


# -- configuration ----------------------------------------------------------------------------


def test_one_upstream_stays_the_single_upstream_several_make_a_fleet() -> None:
    single = load_config(None, {"upstream": ["http://a:1/v1"]})
    assert single.upstream == "http://a:1/v1" and single.fleet() == []
    fleet = load_config(None, {"upstream": ["http://a:1/v1", "http://b:2/v1"]})
    assert [entry.url for entry in fleet.fleet()] == ["http://a:1/v1", "http://b:2/v1"]
    assert [entry.default_name() for entry in fleet.fleet()] == ["a:1", "b:2"]


def test_the_environment_takes_a_comma_separated_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWIRE_UPSTREAM", "http://a:1/v1, http://b:2/v1")
    monkeypatch.setenv("TOOLWIRE_ROUTING_POLICY", "round_robin")
    config = load_config(None, {})
    assert len(config.fleet()) == 2 and config.fleet_settings().policy is Policy.ROUND_ROBIN


def test_a_bad_upstream_entry_is_refused_at_start_up() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        load_config(None, {"upstreams": [{"url": "ftp://x"}]})
    with pytest.raises(ConfigError, match="weight"):
        load_config(None, {"upstreams": [{"url": "http://x:1/v1", "weight": 0}]})


def test_only_the_trial_s_verdict_moves_a_circuit_that_has_opened() -> None:
    health = Health(HealthSettings(failure_threshold=1, cooldown=10))
    old = health.begin()  # sent while the circuit was closed
    health.failed(0.0, "refused")
    assert health.state is CircuitState.OPEN
    health.succeeded(1.0, call=old)  # an older call's success says nothing of the replica now
    assert health.state is CircuitState.OPEN and not health.admits(5.0)
    assert health.admits(10.0)
    trial = health.begin()
    other = health.begin()  # (a call that was sent beside it, say)
    health.released(other)  # ended without a verdict: the trial is still the trial
    assert not health.admits(10.5)
    health.failed(10.6, "cut", call=other)  # not the trial: the circuit stays half-open
    assert health.state is CircuitState.HALF_OPEN and not health.admits(10.7)
    health.succeeded(11.0, call=trial)
    assert health.state is CircuitState.CLOSED and health.admits(11.0)


def test_a_session_id_is_read_alike_from_raw_request_headers() -> None:
    """The server's headers (Starlette's, scanned raw): the same order of preference, the first
    of a repeated header, an empty one skipped, an overlong one cut."""
    from starlette.datastructures import Headers

    def raw(*pairs: tuple[str, str]) -> Headers:
        return Headers(raw=[(k.encode(), v.encode("latin-1")) for k, v in pairs])

    assert session_of(raw(("session_id", "codex"), ("x-claude-code-session-id", "cc"))) == "cc"
    assert session_of(raw(("x-session-affinity", ""), ("session_id", "codex"))) == "codex"
    assert session_of(raw(("session_id", "first"), ("session_id", "second"))) == "first"
    assert session_of(raw(("x-other", "1"))) is None
    assert session_of(raw(("session_id", "é" * 300))) == "é" * 256
