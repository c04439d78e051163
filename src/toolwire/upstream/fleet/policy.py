"""Which replica a model call goes to. Pure: no I/O, no clock; the router passes the
candidates (replicas serving the model, their circuits admitting a call).

The default, `affinity`, keeps a session on the replica that holds its prompt prefix (the
model server's prefix cache: a prefix computed once is reused by every later turn, which only
appends to it) and balances sessions, not calls, by load:

1. a continuation goes where its previous turn went (the store says where: every toolwire
   replica agrees);
2. else a session seen before goes where it went last (remembered here, per process);
3. else its key (a client session header, else the prompt's opening) is hashed onto the
   candidates by rendezvous hashing: adding or removing a replica moves only the sessions
   that hash to it. (Sessions of one agent share its system prompt; placing them by it
   instead would compute that prefix on fewer replicas, but would pile every new session of
   a quiet fleet onto one replica: once per replica is cheap, a pile-up is not.)
4. the choice yields to load: a session stays on its replica while that replica has at most
   `load_bound` times its weighted share of the calls in flight (and at most halfway from
   its share to all of them: with two replicas, 3 × ½ would be more than all, and a flood of
   calls under one session would never spread); a session placed anew (a
   new one, or one whose replica is over that bound) goes to the first replica in its key's
   rendezvous order that has no more than its share of the calls in flight and of the
   sessions seen in the last ten minutes (consistent hashing with bounded loads), and stays
   there. Moving a session costs its whole prefix, so a session with a home is
   moved only past the looser bound; placing a new one costs nothing either way, so it
   takes the tight one, which is what keeps the load even.

`round_robin` and `least_outstanding` ignore sessions (what a router without the
conversation can do).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

from toolwire.upstream.fleet.affinity import mix
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.settings import Policy

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_SCALE = 1.0 / 2.0**53


def rendezvous(key: int, replicas: Sequence[Replica]) -> list[Replica]:
    """The replicas in the key's order of preference: highest random weight first, a
    replica's weight scaling its share (score = -weight / ln(u), u in (0, 1) from the key and
    the replica's seed). The key is mixed once; each replica then costs one multiplication
    (Fibonacci hashing of key xor seed), not a mix of its own: the choice takes microseconds
    at every model call."""
    mixed = mix(key)
    scored = []
    for replica in replicas:
        bits = (((mixed ^ replica.seed) * _GOLDEN) & _MASK) >> 11
        scored.append((-replica.weight / math.log((bits + 0.5) * _SCALE), replica))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    return [replica for _, replica in scored]


def _named(candidates: Sequence[Replica], name: str) -> Replica | None:
    for replica in candidates:
        if replica.name == name:
            return replica
    return None


def _fits(replica: Replica, bound: float, weights: float, calls: float) -> bool:
    """Whether one more call keeps `replica` within `bound` times its share of the calls in
    flight (`calls`: per unit of weight, this one counted; `weights`: the candidates' total),
    but never past halfway from its share to all the calls: with few replicas (3 × ½ of the
    calls is more than all of them) a bound of `load_bound` alone would never be reached, and
    a flood under one session key would all go to one replica."""
    factor = min(bound, (1.0 + weights / replica.weight) / 2.0)
    return replica.outstanding + 1 <= math.ceil(factor * calls * replica.weight)


SESSION_SECONDS = 600.0
"""A session not seen for this long no longer counts on its replica (nor is remembered):
by then the server's prefix cache has most likely let its prefix go too."""


class Selector:
    """The policy's state: the sessions it remembers (each with its replica and when it was
    last seen, least recently seen first), how many live on each replica, and the
    round-robin position."""

    __slots__ = ("_active", "_next", "_sessions", "kept", "load_bound", "policy")

    def __init__(self, policy: Policy, load_bound: float = 3.0, kept: int = 100_000) -> None:
        self.policy = policy
        self.load_bound = load_bound
        self.kept = kept
        self._sessions: OrderedDict[int, tuple[str, float]] = OrderedDict()
        self._active: dict[str, int] = {}
        """Sessions seen in the last `SESSION_SECONDS`, by replica name."""
        self._next = 0

    def pick(
        self,
        candidates: Sequence[Replica],
        *,
        key: int | None = None,
        continues: str | None = None,
        keyed_by_session: bool = False,
        now: float = 0.0,
    ) -> tuple[Replica, str]:
        """(the replica, why). `key`: the session's key (None: nothing to recognise);
        `continues`: the replica the continued turn was served by; `now`: monotonic
        seconds, for how long sessions count."""
        self._expire(now)
        if len(candidates) == 1:
            chosen = candidates[0]
            if key is not None:
                self._remember(key, chosen, now)
            return chosen, "only"
        if self.policy is Policy.ROUND_ROBIN:
            self._next = (self._next + 1) % len(candidates)
            return candidates[self._next], "round_robin"
        if self.policy is Policy.LEAST_OUTSTANDING:
            return self._least(candidates), "least_outstanding"
        return self._affine(candidates, key, continues, keyed_by_session, now)

    def _affine(
        self,
        candidates: Sequence[Replica],
        key: int | None,
        continues: str | None,
        keyed_by_session: bool,
        now: float,
    ) -> tuple[Replica, str]:
        preferred: Replica | None = None
        reason = "continuation"
        if continues is not None:
            preferred = _named(candidates, continues)
        if preferred is None and key is not None:
            last = self._sessions.get(key)
            if last is not None:
                preferred = _named(candidates, last[0])
                reason = "session"
        if preferred is not None and not preferred.outstanding:
            # idle, it has room under any bound (one call is within any share of the calls):
            # the load is not summed for it
            chosen = preferred
        else:
            weights = sum([replica.weight for replica in candidates])
            calls = (sum([replica.outstanding for replica in candidates]) + 1) / weights
            if preferred is not None and _fits(preferred, self.load_bound, weights, calls):
                chosen = preferred  # its prefix is there: it stays, within the bound
            elif key is None:
                return self._least(candidates), "least_outstanding"
            else:
                chosen = self._place(candidates, key, weights, calls)
                if preferred is not None:
                    reason = "load"  # moved off its replica: its prefix is computed anew
                else:
                    reason = "session" if keyed_by_session else "prompt"
        if key is not None:
            self._remember(key, chosen, now)
        return chosen, reason

    def _place(
        self, candidates: Sequence[Replica], key: int, weights: float, calls: float
    ) -> Replica:
        """A session placed anew (a new one, or one whose replica is over the bound): the
        first replica in the key's rendezvous order with no more than its share of the calls
        in flight and of the live sessions (a quiet fleet's sessions spread too), else of the
        calls alone, else the least loaded."""
        active = self._active
        sessions = (sum(active.get(r.name, 0) for r in candidates) + 1) / weights
        order = rendezvous(key, candidates)
        for replica in order:
            if _fits(replica, 1.0, weights, calls) and active.get(replica.name, 0) + 1 <= math.ceil(
                sessions * replica.weight
            ):
                return replica
        return next((r for r in order if _fits(r, 1.0, weights, calls)), None) or self._least(
            candidates
        )

    def _least(self, candidates: Sequence[Replica]) -> Replica:
        """The least loaded for its weight; ties go round in turn."""
        self._next = (self._next + 1) % len(candidates)
        start = self._next
        best = candidates[start]
        for offset in range(1, len(candidates)):
            replica = candidates[(start + offset) % len(candidates)]
            if replica.outstanding / replica.weight < best.outstanding / best.weight:
                best = replica
        return best

    def _remember(self, key: int, replica: Replica, now: float) -> None:
        sessions = self._sessions
        name = replica.name
        known = sessions.get(key)
        if known is None or known[0] != name:
            if known is not None:
                self._active[known[0]] -= 1
            self._active[name] = self._active.get(name, 0) + 1
        sessions[key] = (name, now)
        sessions.move_to_end(key)
        if len(sessions) > self.kept:
            self._forget_oldest()

    def _expire(self, now: float) -> None:
        sessions = self._sessions
        while sessions:
            oldest = next(iter(sessions.values()))
            if now - oldest[1] < SESSION_SECONDS:
                return
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, (name, _) = self._sessions.popitem(last=False)
        self._active[name] -= 1
