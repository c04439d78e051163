"""Settings for `toolwire serve`: defaults < config file (YAML or TOML) < environment < flags.

Every setting has an environment variable `TOOLWIRE_<NAME>` (e.g. `TOOLWIRE_UPSTREAM`,
`TOOLWIRE_PORT`). Secrets never live here in clear: the API key is read from the variable named
by `api_key_env`.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from toolwire.errors import ConfigError
from toolwire.upstream.fleet.settings import (
    FleetSettings,
    HealthSettings,
    Policy,
    UpstreamEntry,
)

MiB = 1024 * 1024
_LISTS = frozenset({"tools", "allowed_origins", "allowed_hosts"})


class McpServerConfig(BaseModel):
    """An MCP server toolwire itself knows: a stdio command or a URL, credentials from env."""

    model_config = ConfigDict(extra="forbid")

    label: str
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> environment variable holding its value"
    )
    authorization_env: str | None = Field(
        default=None, description="env var holding a bearer token"
    )
    default: bool = Field(default=False, description="offer it to every request")
    require_approval: Any = "never"
    allowed_tools: list[str] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError(f"MCP server {self.label!r} needs exactly one of url and command")
        return self


class WorkspaceConfig(BaseModel):
    """The built-in file and search tools over one directory, offered as server-side tools."""

    model_config = ConfigDict(extra="forbid")

    root: str
    allow_write: bool = False
    allow_exec: bool = False
    exec_needs_approval: bool = True
    exec_sandbox: Literal["auto", "bwrap", "none"] = Field(
        default="auto",
        description="auto: bubblewrap when it works here, else unsandboxed with a warning; "
        "bwrap: refuse to start without it; none: never sandbox",
    )
    exec_memory_mb: int = Field(
        default=4096,
        ge=0,
        description="data-memory limit per exec process, and the size of its /tmp (0: none)",
    )
    exec_max_processes: int = Field(
        default=256, ge=0, description="processes an exec command may have, per uid (0: none)"
    )
    exec_max_file_mb: int = Field(
        default=1024, ge=0, description="largest file an exec command may write (0: none)"
    )


class WebSearchConfig(BaseModel):
    """Which MCP tool serves requests' `web_search` tool: any tool of a configured MCP server
    (`mcp_servers`, by label) that takes a query string."""

    server: str = Field(description="the label of a server in mcp_servers")
    tool: str = Field(description="the name of its search tool")
    query_argument: str = Field(default="query", description="the tool's query parameter")


class WebFetchConfig(BaseModel):
    """Which MCP tool serves Anthropic's `web_fetch` server tool on `/v1/messages`: any tool of
    a configured MCP server that takes a URL string (a fetch server)."""

    server: str = Field(description="the label of a server in mcp_servers")
    tool: str = Field(description="the name of its fetch tool")
    url_argument: str = Field(default="url", description="the tool's URL parameter")


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    upstream: str | None = Field(
        default=None,
        description="chat-completions base URL; none: the managed local model; given several "
        "times (or comma-separated in the environment), a fleet (see upstreams)",
    )
    upstreams: list[UpstreamEntry] = Field(
        default_factory=list,
        description="a fleet of model servers (url, models, weight, api_key_env, vision, "
        "reasoning_replay, context_window, resume): requests are routed among those serving "
        "their model; see docs/fleet.md",
    )
    routing_policy: Policy = Field(
        default=Policy.AFFINITY,
        description="fleet: affinity (a session stays on the server holding its prefix, "
        "balanced by load), round_robin or least_outstanding",
    )
    routing_load_bound: float = Field(
        default=3.0,
        ge=1.0,
        description="fleet, affinity: a session stays on its server while the server's calls "
        "in flight stay within this many times its share of all calls in flight",
    )
    failover_attempts: int = Field(
        default=3, ge=0, description="fleet: further servers a failed model call may try"
    )
    circuit_failures: int = Field(
        default=3, ge=1, description="fleet: failures in a row that take a server out"
    )
    circuit_cooldown: float = Field(
        default=10.0, gt=0, description="fleet: seconds before a server taken out is tried again"
    )
    upstream_probe_seconds: float = Field(
        default=10.0,
        ge=0,
        description="fleet: seconds between probes (GET /models) of every server (0: none)",
    )
    model_path: str | None = Field(default=None, description="GGUF for the managed local model")
    local_n_ctx: int = Field(
        default=4096, ge=256, description="context window (tokens) of the managed local model"
    )
    model: str | None = Field(default=None, description="default model when a request names none")
    api_key_env: str | None = None
    upstream_headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: float = 10.0
    read_timeout: float = 300.0
    max_retries: int = 3
    db: str | None = Field(
        default=None, description="database URL; default: SQLite in the user data dir"
    )
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = Field(
        default=1,
        ge=1,
        description="server processes sharing the port and the database (one per core)",
    )
    tools: list[str] = Field(default_factory=list, description="server-side tools, module:object")
    anthropic_models: dict[str, str] = Field(
        default_factory=dict,
        description="Messages door (/v1/messages): requested model name or tier (opus, sonnet, "
        "haiku, default) -> upstream model; `NAME=MODEL,...` in the environment",
    )
    gemini_models: dict[str, str] = Field(
        default_factory=dict,
        description="Gemini door (/v1beta/models/...): requested model name or family (pro, "
        "flash, flash-lite, default) -> upstream model; `NAME=MODEL,...` in the environment",
    )
    anthropic_ping_interval: float = Field(
        default=10.0,
        gt=0,
        description="Messages door: seconds without an event after which a stream sends `ping`",
    )
    context_window: int | None = Field(
        default=None,
        ge=256,
        description="the upstream's context window in tokens (default: asked of the upstream, "
        "or local_n_ctx for the managed local model); the Messages and Gemini doors cap "
        "their output to it",
    )
    leaked_calls: Literal["retry", "salvage", "off"] = "retry"
    leak_retries: int = 2
    check_tool_arguments: bool = Field(
        default=True,
        description="check every tool call against its tool's schema: one-meaning repairs, "
        "else one hidden re-ask (docs/tool-calls.md); false: calls go on as the model wrote "
        "them, and their arguments stream live",
    )
    argument_retries: int = Field(
        default=1, ge=0, description="re-asks in a row for calls that do not fit their tool"
    )
    strict_tools: Literal["auto", "enforced", "ignored"] = Field(
        default="auto",
        description="does the upstream enforce `strict` tools' schemas (then `strict` is "
        "passed on): auto learns it (vLLM >= 0.27, OpenAI)",
    )
    max_iterations: int = 20
    log_level: str = Field(
        default="info",
        description="uvicorn's log level; above info (warning, error, critical) the request "
        "log keeps only the lines of 5xx answers",
    )
    access_log: bool = Field(
        default=False, description="one log line per request (costs ~15% of a proxied request)"
    )
    log_format: Literal["text", "json", "off"] = Field(
        default="text", description="one structured line per request (observe/requests.py)"
    )
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    workspace: WorkspaceConfig | None = None
    mcp_idle_seconds: float = 300.0
    mcp_call_timeout: float = 60.0
    mcp_allow_private_urls: bool = Field(
        default=False,
        description="let requests' MCP server_url reach loopback, private and link-local "
        "addresses (cloud metadata included); see docs/security.md",
    )
    # -- security: see docs/security.md --------------------------------------------------
    allow_unauthenticated: bool = Field(
        default=False, description="serve beyond loopback with no API key (not recommended)"
    )
    allowed_origins: list[str] = Field(
        default_factory=list, description="browser origins allowed to call (CORS); default none"
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names accepted besides loopback ones when bound to loopback",
    )
    key_cache_seconds: float = Field(
        default=2.0, ge=0, description="how long the server trusts its copy of the key list"
    )
    max_body_bytes: int = Field(default=4 * MiB, gt=0)
    max_json_depth: int = Field(default=64, gt=0)
    max_input_items: int = Field(default=2048, gt=0)
    max_tools: int = Field(default=512, gt=0)
    max_websockets: int = Field(
        default=256, gt=0, description="WebSockets of /v1/responses open at once, per process"
    )
    max_websockets_per_key: int = Field(
        default=32, gt=0, description="WebSockets one API key may hold open at once, per process"
    )
    max_streams_per_key: int = Field(
        default=64,
        gt=0,
        description="requests one API key may have running at once (streams included), per process",
    )
    max_websocket_queue_bytes: int = Field(
        default=16 * MiB,
        gt=0,
        description="WebSocket messages read and not yet answered, all sockets together; past "
        "it sockets are not read, then closed (1013); at least max_body_bytes",
    )
    websocket_queue_wait: float = Field(
        default=10.0,
        ge=0,
        description="seconds a socket waits, unread, for room among the queued messages before "
        "it is closed (1013)",
    )
    max_stored_bytes_per_key: int = Field(
        default=1024 * MiB,
        ge=0,
        description="bytes of responses and conversation items one API key may keep stored "
        "(0: no quota)",
    )
    websocket_max_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="how long one WebSocket of /v1/responses may stay open (OpenAI: 60 min)",
    )
    max_url_bytes: int = Field(
        default=8 * 1024, gt=0, description="longest request URL (path and query); else 414"
    )
    max_header_bytes: int = Field(
        default=32 * 1024, gt=0, description="most bytes of request headers in all; else 431"
    )
    max_upstream_event_bytes: int = Field(default=8 * MiB, gt=0)
    max_upstream_response_bytes: int = Field(default=64 * MiB, gt=0)
    upstream_vision: bool = Field(
        default=True,
        description="the upstream model sees images; false: images become a one-line note",
    )
    upstream_reasoning_replay: Literal["auto", "reasoning_content", "reasoning", "off"] = Field(
        default="auto",
        description="the field reasoning from history goes back to the model in: auto is the "
        "one the upstream writes it in; off sends none",
    )
    web_search: WebSearchConfig | None = Field(
        default=None, description="the MCP tool that serves the `web_search` tool"
    )
    web_fetch: WebFetchConfig | None = Field(
        default=None, description="the MCP tool that serves Anthropic's `web_fetch` tool"
    )
    # -- durability: see docs/deployment.md ---------------------------------------------
    migrate: bool = Field(
        default=True, description="upgrade an older database schema on start (else refuse)"
    )
    upstream_idle_timeout: float = Field(
        default=120.0, gt=0, description="seconds an upstream stream may go without an event"
    )
    upstream_fallback_seconds: float = Field(
        default=300.0, ge=0, description="how long a fallback learned from the upstream holds"
    )
    response_deadline: float = Field(
        default=1800.0, ge=0, description="seconds one response may run in all (0: no limit)"
    )
    lease_heartbeat_seconds: float = Field(
        default=2.0, gt=0, description="how often this replica renews its lease"
    )
    lease_seconds: float = Field(
        default=10.0, gt=0, description="a replica silent this long is dead; its runs end"
    )
    queue_poll_seconds: float = Field(
        default=0.5, gt=0, description="how often queued jobs and cancel flags are looked for"
    )
    max_background: int = Field(
        default=32, gt=0, description="background responses one replica runs at once"
    )
    background_attempts: int = Field(
        default=3, gt=0, description="processes that may die running one background response"
    )

    @model_validator(mode="before")
    @classmethod
    def _several_upstreams(cls, data: Any) -> Any:
        """`upstream` given several times (a list, or comma-separated) is a fleet: its URLs
        join `upstreams`; given once it stays the single upstream it always was."""
        if not isinstance(data, dict):
            return data
        value = data.get("upstream")
        if isinstance(value, str) and "," in value:
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            data = dict(data)
            if len(value) <= 1:
                data["upstream"] = value[0] if value else None
            else:
                data["upstream"] = None
                extra = list(data.get("upstreams") or [])
                data["upstreams"] = [{"url": url} for url in value] + extra
        return data

    @model_validator(mode="after")
    def _upstream_is_a_url(self) -> ServerConfig:
        if self.upstream is not None:
            parts = urlsplit(self.upstream)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"--upstream {self.upstream!r} is not an http(s) URL: give the model "
                    "server's chat-completions base URL, e.g. http://127.0.0.1:8000/v1"
                )
        return self

    def fleet(self) -> list[UpstreamEntry]:
        """The model servers to route among (empty: a single upstream, or the local model):
        `upstreams`, after `upstream` when both are given."""
        if not self.upstreams:
            return []
        first = [UpstreamEntry(url=self.upstream)] if self.upstream else []
        return first + list(self.upstreams)

    def fleet_settings(self) -> FleetSettings:
        return FleetSettings(
            policy=self.routing_policy,
            load_bound=self.routing_load_bound,
            failover_attempts=self.failover_attempts,
            health=HealthSettings(
                failure_threshold=self.circuit_failures,
                cooldown=self.circuit_cooldown,
                probe_interval=self.upstream_probe_seconds,
            ),
        )

    @field_validator("anthropic_models", "gemini_models", mode="before")
    @classmethod
    def _anthropic_models(cls, value: Any) -> Any:
        return _name_map(value)


def _name_map(value: Any) -> Any:
    """`NAME=MODEL` pairs (a comma-separated string, or a list of them) -> a mapping."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        pairs = [str(item).partition("=") for item in value]
        bad = [name for name, sep, model in pairs if not sep or not name.strip() or not model]
        if bad:
            raise ValueError(f"expected NAME=MODEL, got {bad[0]!r}")
        return {name.strip(): model.strip() for name, _, model in pairs}
    return value


def load_config(path: Path | None, flags: dict[str, Any]) -> ServerConfig:
    data: dict[str, Any] = {}
    if path is not None:
        data.update(_read_file(path))
    for name in ServerConfig.model_fields:
        value = os.environ.get(f"TOOLWIRE_{name.upper()}")
        if value is not None:
            data[name] = value.split(",") if name in _LISTS else value
    data.update({k: v for k, v in flags.items() if v is not None and v != []})
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"invalid setting {where}: {message}" if where else message) from None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    # PyYAML imported here, for a YAML file alone: a server process (server/handover.py, the
    # workers) is handed its settings already read and never needs it (~1 MB)
    import yaml

    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"config file {path} is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping")
    return data
