"""Building and running the server from a `ServerConfig`."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from toolwire.config import McpServerConfig, ServerConfig, WebSearchConfig
from toolwire.errors import ConfigError
from toolwire.loop.approvals import ApprovalSigner
from toolwire.loop.compaction import CompactionCodec
from toolwire.loop.driver import LoopDriver, Observe
from toolwire.loop.state import LoopSettings
from toolwire.observe import metrics
from toolwire.observe.fleet import watch_fleet
from toolwire.observe.setup import Observability
from toolwire.runtime import Closer, Runtime
from toolwire.server.app import create_app
from toolwire.server.gate.limits import Limits
from toolwire.server.gate.quotas import QuotaUpstream
from toolwire.server.gate.security import startup_security
from toolwire.server.gemini.translate import GeminiSettings
from toolwire.server.http.protocol import bounded_protocol
from toolwire.server.messages.translate import MessagesSettings
from toolwire.server.responses.durable import DurabilitySettings
from toolwire.server.responses.prepare.mcp_tools import configured_server
from toolwire.server.startup import check_port, check_upstream, fleet_lines, summary_lines
from toolwire.server.workers import reuse_port_socket, run_workers
from toolwire.store.database import Store
from toolwire.store.timelines import TimelineStore
from toolwire.store.urls import default_database_url, shown_database
from toolwire.tools.base import Tool
from toolwire.tools.loading import load_tools
from toolwire.tools.mcp.pool import McpPool
from toolwire.tools.web import WebBackend, WebTools
from toolwire.upstream.base import Upstream
from toolwire.upstream.chat_completions import ChatCompletionsConfig, ChatCompletionsUpstream
from toolwire.upstream.fleet.build import build_router
from toolwire.upstream.fleet.router import FleetRouter
from toolwire.upstream.fleet.settings import UpstreamEntry
from toolwire.upstream.local_llama import ManagedLlamaServer


def _workspace_tools(config: ServerConfig) -> list[Tool]:
    if config.workspace is None:
        return []
    from toolwire.tools.workspace import Workspace, WorkspaceError, workspace_tools

    settings = config.workspace
    root = Path(settings.root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"workspace.root is not a directory: {root}")
    workspace = Workspace(
        root,
        allow_write=settings.allow_write,
        allow_exec=settings.allow_exec,
        exec_sandbox=settings.exec_sandbox,
        exec_memory_mb=settings.exec_memory_mb,
        exec_max_processes=settings.exec_max_processes,
        exec_max_file_mb=settings.exec_max_file_mb,
    )
    if workspace.allow_exec:
        try:
            workspace.check_sandbox()  # says at start-up whether exec is sandboxed
        except WorkspaceError as exc:
            raise ConfigError(f"workspace: {exc}") from None
    return list(workspace_tools(workspace, exec_needs_approval=settings.exec_needs_approval))


def web_tools(config: ServerConfig, pool: McpPool) -> WebTools:
    """The MCP tools serving web search and fetch (`web_search`, `web_fetch` settings)."""
    servers = {server.label: server for server in config.mcp_servers}
    backends: list[WebBackend | None] = []
    for setting, chosen in (("web_search", config.web_search), ("web_fetch", config.web_fetch)):
        if chosen is None:
            backends.append(None)
            continue
        if chosen.server not in servers:
            raise ConfigError(f"{setting}.server {chosen.server!r} is not a label in mcp_servers")
        argument = (
            chosen.query_argument if isinstance(chosen, WebSearchConfig) else chosen.url_argument
        )
        backends.append(
            WebBackend(configured_server(servers[chosen.server]), chosen.tool, argument)
        )
    return WebTools(
        backends[0],
        backends[1],
        pool,
        allow_private_urls=config.mcp_allow_private_urls,
        timeout=config.mcp_call_timeout,
    )


async def compose(
    *,
    upstream: Upstream,
    store: Store,
    default_model: str | None = None,
    server_tools: Sequence[Tool] = (),
    loop_settings: LoopSettings | None = None,
    mcp_servers: Sequence[McpServerConfig] = (),
    mcp_pool: McpPool | None = None,
    mcp_call_timeout: float = 60.0,
    web_search: WebSearchConfig | None = None,
    observe: Observe | None = None,
    closers: Sequence[Closer] = (),
) -> Runtime:
    """The one `Runtime` every wing of the app runs on. Every model call of every door goes
    through the quota reservation (`server/gate/quotas.py`), which wraps `upstream` here, once;
    `observe` (metrics, traces) is composed into the driver. The approval and compaction codecs
    use a secret kept in the store, shared by replicas and kept across restarts."""
    stack = QuotaUpstream(upstream, store.quotas)
    secret = await store.secret("approval_requests")
    return Runtime(
        store=store,
        upstream=stack,
        driver=LoopDriver(stack, observe=observe),
        signer=ApprovalSigner(secret),
        compaction=CompactionCodec(secret),
        timelines=TimelineStore(),
        loop_settings=loop_settings or LoopSettings(),
        default_model=default_model,
        server_tools=list(server_tools),
        mcp_pool=mcp_pool or McpPool(),
        mcp_servers=list(mcp_servers),
        mcp_call_timeout=mcp_call_timeout,
        web_search=web_search,
        closers=list(closers),
    )


async def build_app(config: ServerConfig) -> Starlette:
    shutdown: list[Callable[[], Awaitable[None]]] = []
    if config.lease_seconds <= config.lease_heartbeat_seconds:
        raise ConfigError("lease_seconds must be longer than lease_heartbeat_seconds")
    store = await Store.open(config.db, migrate=config.migrate)
    store.storage.max_bytes = config.max_stored_bytes_per_key  # per key (store/storage.py)
    try:
        security = await startup_security(
            store,
            host=config.host,
            port=config.port,
            allow_unauthenticated=config.allow_unauthenticated,
            limits=Limits(
                max_body_bytes=config.max_body_bytes,
                max_json_depth=config.max_json_depth,
                max_input_items=config.max_input_items,
                max_tools=config.max_tools,
                max_socket_seconds=config.websocket_max_seconds,
                max_sockets=config.max_websockets,
                max_sockets_per_key=config.max_websockets_per_key,
                max_streams_per_key=config.max_streams_per_key,
                max_socket_queue_bytes=max(config.max_websocket_queue_bytes, config.max_body_bytes),
                socket_queue_wait=config.websocket_queue_wait,
            ),
            allowed_origins=tuple(config.allowed_origins),
            allowed_hosts=tuple(config.allowed_hosts),
            key_cache_seconds=config.key_cache_seconds,
        )
        tools = [*load_tools(config.tools), *_workspace_tools(config)]
    except BaseException:
        await store.close()
        raise
    base_url = config.upstream
    default_model = config.model
    listed: list[str] = []
    upstream_line = f"{base_url}"
    fleet = config.fleet()
    router: FleetRouter | None = None
    if fleet:  # several model servers: the router over them (upstream/fleet/)
        router = await start_fleet(config, fleet)  # closed with `upstream.aclose` below
        listed = router.served() or []
    elif base_url:
        key = ChatCompletionsConfig(
            base_url=base_url, api_key_env=config.api_key_env
        ).resolved_api_key()
        probe = await check_upstream(
            base_url,
            config.model,
            {**config.upstream_headers, **({"authorization": f"Bearer {key}"} if key else {})},
        )
        listed = probe.models
        for warning in probe.warnings:
            print(f"toolwire serve: warning: {warning}", file=sys.stderr, flush=True)
    else:
        local = ManagedLlamaServer(
            Path(config.model_path) if config.model_path else None, n_ctx=config.local_n_ctx
        )
        await local.start()
        shutdown.append(local.stop)
        base_url = local.base_url
        default_model = default_model or local.model_name
        upstream_line = f"the bundled local model ({local.model_name}, at {base_url})"
    upstream: Upstream = router or ChatCompletionsUpstream(
        ChatCompletionsConfig(
            base_url=base_url or "",
            api_key_env=config.api_key_env,
            headers=config.upstream_headers,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            max_retries=config.max_retries,
            max_event_bytes=config.max_upstream_event_bytes,
            max_response_bytes=config.max_upstream_response_bytes,
            vision=config.upstream_vision,
            # the managed llama-cpp-python server refuses unknown message fields
            reasoning_replay=config.upstream_reasoning_replay if config.upstream else "off",
            idle_timeout=config.upstream_idle_timeout,
            fallback_seconds=config.upstream_fallback_seconds,
            strict_tools=config.strict_tools,
        )
    )
    for server in config.mcp_servers:
        configured_server(server)  # credentials from env: fail at start-up, not per request
    pool = McpPool(
        idle_seconds=config.mcp_idle_seconds, allow_private_urls=config.mcp_allow_private_urls
    )
    web = web_tools(config, pool)  # web_search / web_fetch (Messages), googleSearch (Gemini)
    observability = Observability.from_env(  # observe/: metrics, traces, request logs, /ui
        upstream_name=upstream.name,
        tools=tools,
        log_format=config.log_format,
        log_level=config.log_level,
    )
    runtime = await compose(
        upstream=upstream,
        store=store,
        default_model=default_model,
        server_tools=tools,
        loop_settings=LoopSettings(
            leak_mode=config.leaked_calls,
            leak_retries=config.leak_retries,
            check_arguments=config.check_tool_arguments,
            argument_retries=config.argument_retries,
            max_iterations=config.max_iterations,
            deadline=config.response_deadline or None,
        ),
        mcp_servers=config.mcp_servers,
        mcp_pool=pool,
        mcp_call_timeout=config.mcp_call_timeout,
        web_search=config.web_search,
        observe=observability.observe,
        closers=[store.close, *shutdown, observability.shutdown],
    )
    window = config.context_window or (None if config.upstream or fleet else config.local_n_ctx)
    app = create_app(
        runtime,
        security=security,
        messages=MessagesSettings(
            models=config.anthropic_models,
            ping_interval=config.anthropic_ping_interval,
            context_window=window,
            web=web,
        ),
        gemini=GeminiSettings(models=config.gemini_models, context_window=window, web=web),
        durability=DurabilitySettings(
            heartbeat_seconds=config.lease_heartbeat_seconds,
            lease_seconds=config.lease_seconds,
            poll_seconds=config.queue_poll_seconds,
            max_background=config.max_background,
            max_attempts=config.background_attempts,
        ),
        observability=observability,
    )
    if router is not None:
        watch_fleet(router.status)  # observe/: per-upstream state in /metrics
    app.state.summary = summary_lines(
        upstream=upstream_line,
        fleet=fleet_lines(router) if router is not None else None,
        model=default_model,
        listed=listed,
        database=shown_database(config.db or default_database_url()),
        host=config.host,
        port=config.port,
        keys=len(await store.keys.active()),
    )
    return app


async def start_fleet(config: ServerConfig, fleet: list[UpstreamEntry]) -> FleetRouter:
    """The router over the configured model servers, their models listed once (a server
    that does not answer yet is probed again in the background)."""
    router = build_router(
        fleet,
        config.fleet_settings(),
        api_key_env=config.api_key_env,
        vision=config.upstream_vision,
        reasoning_replay=config.upstream_reasoning_replay,
        headers=config.upstream_headers,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        max_event_bytes=config.max_upstream_event_bytes,
        max_response_bytes=config.max_upstream_response_bytes,
        idle_timeout=config.upstream_idle_timeout,
        fallback_seconds=config.upstream_fallback_seconds,
        strict_tools=config.strict_tools,
    )
    await router.start()
    for row in router.status():
        if row.last_error is not None:
            print(
                f"toolwire serve: warning: the upstream {row.name} ({row.url}) does not answer "
                f"now ({row.last_error}); serving anyway: calls go to the others until it does",
                file=sys.stderr,
                flush=True,
            )
    return router


def run(config: ServerConfig, *, reuse_port: bool = False) -> None:
    """Serve until interrupted, on uvloop when it is installed (uvicorn[standard] brings it):
    `asyncio.run` would use the slower stdlib loop, as uvicorn's `loop="auto"` only applies to
    `uvicorn.run`. `workers` > 1: one process per worker (server/workers.py); `reuse_port`: this
    process is one of them, sharing the port. A port in use is refused before anything slow
    (the local model) starts."""
    if not reuse_port:
        check_port(config.host, config.port)
    if config.workers > 1 and not reuse_port:
        run_workers(config, target=f"{__name__}:run")
        return
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(config, reuse_port=reuse_port))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(config, reuse_port=reuse_port))


#: Net new container objects before the cyclic collector's youngest generation is walked
#: (Python's default: 700).
YOUNG_COLLECTION_THRESHOLD = 50_000


def settle_heap() -> None:
    """Ready the collector for serving. What the server is made of (modules, the app, its
    runtime) lives as long as it does: moved out of the collector's generations, so no
    collection walks it again (each full collection did, a cost on the requests that happened
    to trigger one). And the youngest generation is walked after 50 000 new objects, not 700:
    a request's objects die by reference counting (the chat door leaves no cyclic garbage),
    but with 64 requests in flight more than 700 of them are alive most of the time, so the
    collector walked (and promoted) them every few requests: ~12% of the chat door's CPU per
    request at concurrency 64, measured in process. Cyclic garbage, where some path makes it,
    waits at most 50 000 objects for its collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    # the event loop's thread is the only one that counts (observe/metrics.py)
    metrics.update_in_place()


async def serve(config: ServerConfig, *, reuse_port: bool = False) -> None:
    app = await build_app(config)
    settle_heap()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            access_log=config.access_log,
            # no `server: uvicorn` on every answer: it tells a caller only what to attack
            server_header=False,
            # WebSocket mode of /v1/responses: the `websockets` implementation, and frames no
            # bigger than a request body may be (a bigger one closes the socket with 1009
            # before it is buffered). Its keep-alive pings find dead clients.
            ws="websockets-sansio",
            ws_max_size=config.max_body_bytes,
            # URL and header limits, and the parser's refusals in OpenAI's shape
            http=bounded_protocol(config.max_url_bytes, config.max_header_bytes),
        )
    )
    if reuse_port:
        await server.serve(sockets=[reuse_port_socket(config.host, config.port)])
        return
    for line in app.state.summary:  # what is being served, once, before uvicorn's own lines
        print(line, file=sys.stderr, flush=True)
    await server.serve()
