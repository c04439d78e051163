"""One model server as the router sees it: its adapter, the models it serves, its weight,
how a cut turn is continued there, its health and its outstanding calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolwire.upstream.base import Upstream
from toolwire.upstream.fleet.affinity import key_of, mix
from toolwire.upstream.fleet.health import Health
from toolwire.upstream.fleet.settings import HealthSettings, ResumeMode


@dataclass(slots=True, eq=False)
class Replica:
    name: str
    adapter: Upstream
    weight: float = 1.0
    configured: frozenset[str] | None = None
    """The models the configuration says it serves (None: as it lists them)."""
    resume: ResumeMode = "auto"
    context_window: int | None = None
    url: str = ""
    """Its base URL as shown to operators (no credentials, no query)."""
    health: Health = field(default_factory=lambda: Health(HealthSettings()))
    outstanding: int = 0
    """Model calls sent to it and not yet ended (by this process)."""
    listed: list[dict[str, Any]] | None = None
    """Its `GET /models` entries, as last listed (None: never listed; set by `take_listing`)."""
    seed: int = 0
    """Its rendezvous-hashing identity, from its name: the same in every toolwire replica."""
    _models: frozenset[str] | None = None

    def __post_init__(self) -> None:
        self.seed = mix(key_of(b"r\x00" + self.name.encode()))
        self._models = self.configured

    def take_listing(self, entries: list[dict[str, Any]]) -> None:
        """What its `GET /models` answered (configured models, if any, still decide)."""
        self.listed = entries
        if self.configured is None:
            self._models = frozenset(str(e["id"]) for e in entries if e.get("id"))

    def models(self) -> frozenset[str] | None:
        """The models it serves; None while unknown (never listed, none configured)."""
        return self._models

    def serves(self, model: str) -> bool:
        models = self._models
        return models is None or model in models

    def entries(self) -> list[dict[str, Any]]:
        """Its `/models` entries for the union the gateway lists: what it listed (configured
        models it did not list get a plain entry), its context window where configured."""
        listed = {str(e["id"]): dict(e) for e in self.listed or [] if e.get("id")}
        names = sorted(self.configured) if self.configured is not None else list(listed)
        entries = []
        for name in names:
            entry = listed.get(name) or {"id": name, "object": "model", "owned_by": self.name}
            if self.context_window is not None:
                entry["context_window"] = self.context_window
            entries.append(entry)
        return entries
