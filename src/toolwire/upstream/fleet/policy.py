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
   that hash to it;
4. the choice yields to load: a session stays on its replica while that replica has at most
   `load_bound` times its weighted share of the calls in flight; a session placed anew (a
   new one, or one whose replica is over that bound) goes to the first replica in its key's
   rendezvous order that has no more than its share (consistent hashing with bounded loads),
   and stays there. Moving a session costs its whole prefix, so a session with a home is
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


class Selector:
    """The policy's state: the sessions it remembers and the round-robin position."""

    __slots__ = ("_next", "_sessions", "kept", "load_bound", "policy")

    def __init__(self, policy: Policy, load_bound: float = 2.0, kept: int = 100_000) -> None:
        self.policy = policy
        self.load_bound = load_bound
        self.kept = kept
        self._sessions: OrderedDict[int, str] = OrderedDict()
        self._next = 0

    def pick(
        self,
        candidates: Sequence[Replica],
        *,
        key: int | None = None,
        continues: str | None = None,
        keyed_by_session: bool = False,
    ) -> tuple[Replica, str]:
        """(the replica, why). `key`: the session's key (None: nothing to recognise);
        `continues`: the replica the continued turn was served by."""
        if len(candidates) == 1:
            chosen = candidates[0]
            if key is not None:
                self._remember(key, chosen)
            return chosen, "only"
        if self.policy is Policy.ROUND_ROBIN:
            self._next = (self._next + 1) % len(candidates)
            return candidates[self._next], "round_robin"
        if self.policy is Policy.LEAST_OUTSTANDING:
            return self._least(candidates), "least_outstanding"
        return self._affine(candidates, key, continues, keyed_by_session)

    def _affine(
        self,
        candidates: Sequence[Replica],
        key: int | None,
        continues: str | None,
        keyed_by_session: bool,
    ) -> tuple[Replica, str]:
        total = sum(replica.outstanding for replica in candidates)
        share = (total + 1) / sum(replica.weight for replica in candidates)

        def fits(replica: Replica, bound: float) -> bool:
            return replica.outstanding + 1 <= math.ceil(bound * share * replica.weight)

        preferred: Replica | None = None
        reason = "continuation"
        if continues is not None:
            preferred = next((r for r in candidates if r.name == continues), None)
        if preferred is None and key is not None:
            last = self._sessions.get(key)
            if last is not None:
                preferred = next((r for r in candidates if r.name == last), None)
                reason = "session"
        if preferred is not None and fits(preferred, self.load_bound):
            chosen = preferred  # its prefix is there: it stays, within the bound
        elif key is None:
            return self._least(candidates), "least_outstanding"
        else:
            # placed anew (a new session, or one whose replica is over the bound): the first
            # replica in the key's rendezvous order with no more than its share of calls
            order = rendezvous(key, candidates)
            chosen = next((r for r in order if fits(r, 1.0)), None) or self._least(candidates)
            if preferred is not None:
                reason = "load"  # moved off its replica: its prefix is computed anew
            else:
                reason = "session" if keyed_by_session else "prompt"
        if key is not None:
            self._remember(key, chosen)
        return chosen, reason

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

    def _remember(self, key: int, replica: Replica) -> None:
        sessions = self._sessions
        if sessions.get(key) == replica.name:
            sessions.move_to_end(key)
            return
        sessions[key] = replica.name
        sessions.move_to_end(key)
        if len(sessions) > self.kept:
            sessions.popitem(last=False)
