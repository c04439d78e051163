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
4. the choice yields to load when the replica already has more than `load_bound` times its
   weighted share of the calls in flight (consistent hashing with bounded loads): the next
   replica in the key's rendezvous order that has room takes it, and the session stays there.

`round_robin` and `least_outstanding` ignore sessions (what a router without the
conversation can do).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.settings import Policy

_MASK = (1 << 64) - 1
_SCALE = 1.0 / 2.0**64


def _mix(value: int) -> int:
    """splitmix64's finalizer: a key and a replica's seed to a uniform 64-bit score."""
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def rendezvous(key: int, replicas: Sequence[Replica]) -> list[Replica]:
    """The replicas in the key's order of preference (highest random weight first; a
    replica's weight scales its share: score = -weight / ln(u))."""
    scored = []
    for replica in replicas:
        unit = (_mix(key ^ replica.seed) + 0.5) * _SCALE
        scored.append((-replica.weight / math.log(unit), replica))
    scored.sort(key=lambda pair: pair[0], reverse=True)
    return [replica for _, replica in scored]


class Selector:
    """The policy's state: the sessions it remembers and the round-robin position."""

    __slots__ = ("_next", "_sessions", "kept", "load_bound", "policy")

    def __init__(self, policy: Policy, load_bound: float = 1.25, kept: int = 100_000) -> None:
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
        weights = sum(replica.weight for replica in candidates)
        room = self.load_bound * (total + 1) / weights

        def fits(replica: Replica) -> bool:
            return replica.outstanding + 1 <= math.ceil(room * replica.weight)

        preferred: Replica | None = None
        reason = "continuation"
        if continues is not None:
            preferred = next((r for r in candidates if r.name == continues), None)
        if preferred is None and key is not None:
            last = self._sessions.get(key)
            if last is not None:
                preferred = next((r for r in candidates if r.name == last), None)
                reason = "session"
        if preferred is not None and fits(preferred):
            chosen = preferred
        elif key is None:
            return self._least(candidates), "least_outstanding"
        else:
            order = rendezvous(key, candidates)
            if preferred is None:
                reason = "session" if keyed_by_session else "prompt"
                preferred = order[0]
            chosen = next((r for r in order if fits(r)), None) or self._least(candidates)
            if chosen is not preferred:
                reason = "load"
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
