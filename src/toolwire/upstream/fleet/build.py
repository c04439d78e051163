"""The router from configuration: one `ChatCompletionsUpstream` per configured model server
(each without retries of its own: the router retries on another replica instead), wrapped in
`Replica`s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwire.upstream.chat_completions import (
    ChatCompletionsConfig,
    ChatCompletionsUpstream,
    shown_url,
)
from toolwire.upstream.fleet.health import Health
from toolwire.upstream.fleet.replica import Replica
from toolwire.upstream.fleet.router import FleetRouter
from toolwire.upstream.fleet.settings import FleetSettings, UpstreamEntry


def build_router(
    entries: Sequence[UpstreamEntry],
    settings: FleetSettings,
    *,
    api_key_env: str | None = None,
    vision: bool = True,
    reasoning_replay: str = "auto",
    **adapter: Any,
) -> FleetRouter:
    """`api_key_env`, `vision`, `reasoning_replay`: the defaults of entries that set none;
    `adapter`: `ChatCompletionsConfig` settings every replica shares (timeouts, limits,
    headers)."""
    replicas = []
    taken: set[str] = set()
    for entry in entries:
        name = entry.name or entry.default_name()
        if name in taken:  # two servers on one host:port (different paths): numbered
            number = 2
            while f"{name}#{number}" in taken:
                number += 1
            name = f"{name}#{number}"
        taken.add(name)
        config = ChatCompletionsConfig(
            base_url=entry.url,
            name=name,
            api_key_env=entry.api_key_env or api_key_env,
            vision=vision if entry.vision is None else entry.vision,
            reasoning_replay=entry.reasoning_replay or reasoning_replay,
            **{**adapter, "max_retries": 0},
        )
        replicas.append(
            Replica(
                name=name,
                adapter=ChatCompletionsUpstream(config),
                weight=entry.weight,
                configured=frozenset(entry.models) if entry.models else None,
                resume=entry.resume,
                context_window=entry.context_window,
                url=shown_url(entry.url),
                health=Health(settings.health),
            )
        )
    return FleetRouter(replicas, settings)
