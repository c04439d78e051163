"""How a fleet is configured: one `UpstreamEntry` per model server (`upstreams:` in the
config file, or `--upstream URL` given more than once) and the `FleetSettings` the router
runs by. Operator configuration only: no address here ever comes from a request."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

ResumeMode = Literal["auto", "continue_final_message", "prefill", "off"]
"""How a cut turn is continued on this server: `continue_final_message` (vLLM, SGLang and
llama.cpp's `llama-server`: the trailing assistant message is continued, with
`add_generation_prompt: false`), `prefill` (the trailing assistant message alone: llama.cpp's
assistant prefill, toolwire's managed llama-cpp-python), `auto` (both signals: what each of
those servers understands), `off` (never: a cut turn that already streamed text fails)."""


class Policy(StrEnum):
    """Which replica of a model a call goes to (see docs/fleet.md)."""

    AFFINITY = "affinity"
    ROUND_ROBIN = "round_robin"
    LEAST_OUTSTANDING = "least_outstanding"


class UpstreamEntry(BaseModel):
    """One model server of the fleet."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="its chat-completions base URL, e.g. http://10.0.0.5:8000/v1")
    name: str | None = Field(
        default=None,
        description="how metrics, /ui and stored responses name it (default: host:port)",
    )
    models: list[str] | None = Field(
        default=None,
        description="the models it serves (default: what its GET /v1/models lists, refreshed)",
    )
    weight: float = Field(default=1.0, gt=0, description="its share of the load")
    api_key_env: str | None = Field(default=None, description="the variable holding its key")
    vision: bool | None = Field(default=None, description="default: upstream_vision")
    reasoning_replay: Literal["auto", "reasoning_content", "reasoning", "off"] | None = Field(
        default=None, description="default: upstream_reasoning_replay"
    )
    context_window: int | None = Field(
        default=None, ge=256, description="its context window in tokens (default: as it says)"
    )
    resume: ResumeMode = Field(
        default="auto", description="how a turn cut after text streamed is continued here"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"upstream url {value!r} is not an http(s) URL: give the model server's "
                "chat-completions base URL, e.g. http://127.0.0.1:8000/v1"
            )
        return value

    def default_name(self) -> str:
        """host:port, never credentials or a query (either may hold a secret)."""
        parts = urlsplit(self.url)
        host = parts.hostname or "upstream"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"{host}:{port}"


@dataclass(slots=True, frozen=True)
class HealthSettings:
    """The circuit breaker and the active probe."""

    failure_threshold: int = 3
    """Consecutive failures (refused, timed out, 502/503/504, 429, cut) that open the circuit."""
    cooldown: float = 10.0
    """Seconds an open circuit waits before one trial call (half-open) may test the replica."""
    probe_interval: float = 10.0
    """Seconds between `GET /models` probes of every replica (0: no active probe); each also
    refreshes the replica's model list."""
    probe_timeout: float = 3.0
    error_window: float = 60.0
    """The error rate shown is over the calls of the last this many seconds."""


@dataclass(slots=True, frozen=True)
class FleetSettings:
    policy: Policy = Policy.AFFINITY
    load_bound: float = 3.0
    """Affinity yields to load past this: a session stays on its replica while the replica's
    calls in flight stay within `load_bound` times its weighted share of all calls in flight
    (and within halfway from its share to all of them, so that the bound bites with few
    replicas too); past it the session is placed anew, on a replica within its share
    (`policy.py`)."""
    failover_attempts: int = 3
    """Further replicas (or tries) a model call may take after its first fails."""
    failover_backoff: float = 0.05
    """Seconds before the first failover (doubling, jittered, at most `failover_max_backoff`)."""
    failover_max_backoff: float = 2.0
    sessions_kept: int = 100_000
    """Sessions whose last replica is remembered (least recently used forgotten first)."""
    health: HealthSettings = field(default_factory=HealthSettings)
