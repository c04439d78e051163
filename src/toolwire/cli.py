"""toolwire: an agent gateway for open models.

`toolwire demo` shows a local model calling a tool, traced live; `toolwire serve` runs the
OpenAI-compatible server (in front of your model server, or the bundled local model);
`toolwire run "…"` runs one agent task in this terminal. Add --help to any command.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from toolwire.agent import Agent
from toolwire.console import TracePrinter
from toolwire.errors import ToolwireError
from toolwire.loop.compaction import ContextPolicy
from toolwire.loop.state import LoopSettings
from toolwire.tools.base import Tool
from toolwire.tools.loading import load_tools

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__,
    # click's plain help: flags without a type, defaults shown; tracebacks only with --debug
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"show_default": True},
)
_debug = os.environ.get("TOOLWIRE_DEBUG", "") not in ("", "0")
#: Set by `main`: this process is the `toolwire` program, so `serve` may hand it over to the
#: server (server/handover.py); a command invoked from elsewhere (tests, a host program) serves
#: in its caller's process.
_own_process = False


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"toolwire {version('toolwire')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="show the full traceback of an error (else one or two lines) [env TOOLWIRE_DEBUG]",
        ),
    ] = False,
) -> None:
    global _debug
    _debug = _debug or debug


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="what to ask the agent")],
    upstream: Annotated[
        str,
        typer.Option(
            help="chat-completions base URL, e.g. http://127.0.0.1:8000/v1",
            envvar="TOOLWIRE_UPSTREAM",
        ),
    ],
    model: Annotated[
        str, typer.Option(help="model name to send upstream", envvar="TOOLWIRE_MODEL")
    ],
    tool_spec: Annotated[
        list[str],
        typer.Option(
            "--tool",
            metavar="MODULE:OBJECT",
            help="tools to offer, e.g. toolwire.demo_tools:ALL (a module in the current "
            "directory or on PYTHONPATH); repeatable",
        ),
    ] = [],  # noqa: B006
    instructions: Annotated[str | None, typer.Option(help="system instructions")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="read the upstream API key from this env var")
    ] = None,
    max_tool_calls: Annotated[
        int | None,
        typer.Option(help="after this many tool calls, the model is asked to answer (no limit)"),
    ] = None,
    max_iterations: Annotated[int, typer.Option(help="most model calls in one task")] = 20,
    leaked_calls: Annotated[
        str,
        typer.Option(
            metavar="retry|salvage|off",
            help="a tool call the model wrote as text: ask it again, run it as written, or "
            "leave it as text",
        ),
    ] = "retry",
    no_stream: Annotated[
        bool, typer.Option("--no-stream", help="ask the upstream not to stream")
    ] = False,
    compact_threshold: Annotated[
        int | None,
        typer.Option(
            help="compact the transcript (the model summarizes it) before a model call whose "
            "prompt passes this many tokens; a context-full refusal compacts anyway"
        ),
    ] = None,
) -> None:
    """Run one agent task and print every step live."""
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    if leaked_calls not in ("retry", "salvage", "off"):
        raise typer.BadParameter("--leaked-calls must be retry, salvage or off")
    settings = LoopSettings(
        max_tool_calls=max_tool_calls,
        max_iterations=max_iterations,
        leak_mode=leaked_calls,  # type: ignore[arg-type]
        stream=not no_stream,
    )
    try:
        client = ChatCompletionsUpstream(upstream, api_key_env=api_key_env)
    except ToolwireError as exc:
        raise typer.BadParameter(exc.message) from exc
    try:
        tools = load_tools(tool_spec)
    except ToolwireError as exc:
        raise typer.BadParameter(exc.message, param_hint="--tool") from None
    context = ContextPolicy(compact_threshold=compact_threshold)
    status = asyncio.run(_run(client, model, tools, instructions, settings, prompt, context))
    raise typer.Exit(0 if status == "completed" else 1)


async def _run(
    upstream: Any,
    model: str,
    tools: list[Tool],
    instructions: str | None,
    settings: LoopSettings,
    prompt: str,
    context: ContextPolicy | None = None,
) -> str:
    printer = TracePrinter()
    async with Agent(
        upstream, model, tools, instructions, settings=settings, context=context
    ) as agent:
        status = "failed"
        async for event in agent.stream(prompt):
            printer(event)
            status = getattr(event, "status", status)
        return status


@app.command()
def serve(
    upstream: Annotated[
        list[str],
        typer.Option(
            metavar="URL",
            help="your model server's chat-completions base URL, e.g. "
            "http://127.0.0.1:8000/v1; leave it out to start the bundled local model "
            "(SmolLM2-135M, needs `make run`'s set-up); repeat it to route among several "
            "servers (docs/fleet.md) [env TOOLWIRE_UPSTREAM]",
        ),
    ] = [],  # noqa: B006
    model: Annotated[
        str | None,
        typer.Option(
            help="model used when a request names none (default: the bundled model's, or "
            "none) [env TOOLWIRE_MODEL]"
        ),
    ] = None,
    routing_policy: Annotated[
        str | None,
        typer.Option(
            metavar="POLICY",
            help="with several upstreams: affinity (default), round_robin or "
            "least_outstanding [env TOOLWIRE_ROUTING_POLICY]",
        ),
    ] = None,
    model_path: Annotated[
        str | None,
        typer.Option(metavar="GGUF", help="another GGUF file for the bundled local model"),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            metavar="VAR", help="name of the environment variable holding the upstream's API key"
        ),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="database URL, e.g. sqlite:///toolwire.db or postgresql://user:pw@host/db "
            "(default: toolwire.db in the user data directory)",
        ),
    ] = None,
    host: Annotated[str | None, typer.Option(help="bind address (default 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default 8080)")] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="server processes sharing the port and database (default 1; 1/core)"),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML or TOML config file")] = None,
    tool_spec: Annotated[
        list[str],
        typer.Option(
            "--tool",
            metavar="MODULE:OBJECT",
            help="a tool the server runs itself, e.g. toolwire.demo_tools:ALL; repeatable",
        ),
    ] = [],  # noqa: B006
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="serve beyond loopback with no API key (anyone who reaches it can use it)",
        ),
    ] = False,
    allow_origin: Annotated[
        list[str],
        typer.Option(
            "--allow-origin",
            metavar="ORIGIN",
            help="browser origin allowed to call (CORS), repeatable",
        ),
    ] = [],  # noqa: B006
    allow_host: Annotated[
        list[str],
        typer.Option(
            "--allow-host",
            metavar="HOST",
            help="Host name accepted besides loopback names, repeatable",
        ),
    ] = [],  # noqa: B006
    max_body_bytes: Annotated[
        int | None, typer.Option(help="largest request body (default 4 MiB)")
    ] = None,
    max_json_depth: Annotated[
        int | None, typer.Option(help="deepest JSON nesting (default 64)")
    ] = None,
    max_input_items: Annotated[
        int | None, typer.Option(help="most input / items / messages entries (default 2048)")
    ] = None,
    max_tools: Annotated[int | None, typer.Option(help="most tools (default 512)")] = None,
    max_upstream_event_bytes: Annotated[
        int | None, typer.Option(help="largest upstream SSE event (default 8 MiB)")
    ] = None,
    max_upstream_response_bytes: Annotated[
        int | None, typer.Option(help="largest upstream answer (default 64 MiB)")
    ] = None,
    log_format: Annotated[
        str | None, typer.Option(help="request log lines: text | json | off (default text)")
    ] = None,
    anthropic_model: Annotated[
        list[str],
        typer.Option(
            "--anthropic-model",
            help="on /v1/messages: requested name or tier (opus, sonnet, haiku, default) = "
            "upstream model, e.g. sonnet=qwen3-coder; repeatable",
        ),
    ] = [],  # noqa: B006
    gemini_model: Annotated[
        list[str],
        typer.Option(
            "--gemini-model",
            help="on /v1beta/models/...: requested name or family (pro, flash, flash-lite, "
            "default) = upstream model, e.g. flash=qwen3-coder; repeatable",
        ),
    ] = [],  # noqa: B006
    context_window: Annotated[
        int | None,
        typer.Option(help="the upstream's context window in tokens (default: asked of it)"),
    ] = None,
    no_migrate: Annotated[
        bool,
        typer.Option(
            "--no-migrate",
            help="refuse to start on an older database schema instead of upgrading it",
        ),
    ] = False,
) -> None:
    """Serve the OpenAI-compatible API (/v1/responses, /v1/chat/completions,
    /v1/conversations, /v1/models) in front of --upstream, or of the bundled local model when
    --upstream is left out. Runs and pending approvals are shown at /ui.

    Binds to 127.0.0.1:8080; binding elsewhere needs an API key (`toolwire keys create NAME`)
    or --allow-unauthenticated. See docs/server.md and docs/security.md."""
    from toolwire.config import load_config
    from toolwire.server.main import run as run_server

    flags = {
        "upstream": upstream,
        "model": model,
        "routing_policy": routing_policy,
        "model_path": model_path,
        "api_key_env": api_key_env,
        "db": db,
        "host": host,
        "port": port,
        "workers": workers,
        "tools": tool_spec,
        "allow_unauthenticated": True if allow_unauthenticated else None,
        "allowed_origins": allow_origin,
        "allowed_hosts": allow_host,
        "max_body_bytes": max_body_bytes,
        "max_json_depth": max_json_depth,
        "max_input_items": max_input_items,
        "max_tools": max_tools,
        "max_upstream_event_bytes": max_upstream_event_bytes,
        "max_upstream_response_bytes": max_upstream_response_bytes,
        "log_format": log_format,
        "migrate": False if no_migrate else None,
        "anthropic_models": anthropic_model,
        "gemini_models": gemini_model,
        "context_window": context_window,
    }
    try:
        settings = load_config(config, flags)
        if _own_process:
            from toolwire.server.handover import handover

            handover(settings, debug=_debug)  # returns only where it cannot hand over
        run_server(settings)
    except ToolwireError as exc:
        typer.echo(f"toolwire serve: {exc.message}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


keys_app = typer.Typer(
    no_args_is_help=True,
    help="API keys of `toolwire serve`, kept (hashed) in its database: the same --db, the same "
    "default. Changes reach a running server within a few seconds.",
)
app.add_typer(keys_app, name="keys")

KeysDb = Annotated[str | None, typer.Option(help="database URL, as for serve [env TOOLWIRE_DB]")]
KeysConfig = Annotated[Path | None, typer.Option(help="serve's config file, for its db")]


def _keys_store(db: str | None, config: Path | None) -> Any:
    from toolwire.config import load_config
    from toolwire.store.database import Store

    try:
        url = load_config(config, {"db": db}).db
    except ToolwireError as exc:
        typer.echo(f"toolwire keys: {exc.message}", err=True)
        raise typer.Exit(2) from None
    return Store.open(url)


KeyRpm = Annotated[
    int | None, typer.Option("--rpm", help="requests per minute (0: no limit)", min=0)
]
KeyTpm = Annotated[int | None, typer.Option("--tpm", help="tokens per minute (0: no limit)", min=0)]
KeyBudget = Annotated[
    int | None,
    typer.Option("--budget", help="tokens per budget period (0: no budget)", min=0),
]
KeyPeriod = Annotated[
    str | None,
    typer.Option("--budget-period", help="hour, day, week or month (UTC; default month)"),
]


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="a name to know the key by (who uses it)")],
    operator: Annotated[
        bool,
        typer.Option(
            "--operator", help="an operator key: sees every tenant in /ui and reads /metrics"
        ),
    ] = False,
    rpm: KeyRpm = None,
    tpm: KeyTpm = None,
    budget: KeyBudget = None,
    budget_period: KeyPeriod = None,
    db: KeysDb = None,
    config: KeysConfig = None,
) -> None:
    """Make a key and print it, once: it is stored only as a hash. Limits are optional."""
    from toolwire.store.keys import BadLimit, KeyNameTaken

    async def create() -> str:
        store = await _keys_store(db, config)
        try:
            _, key = await store.keys.create(
                name,
                operator=operator,
                rpm=rpm,
                tpm=tpm,
                budget=budget,
                budget_period=budget_period,
            )
            return str(key)
        finally:
            await store.close()

    try:
        key = asyncio.run(create())
    except KeyNameTaken:
        typer.echo(f"toolwire keys: a key named {name!r} exists; revoke it first", err=True)
        raise typer.Exit(1) from None
    except BadLimit as exc:
        typer.echo(f"toolwire keys: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(key)
    typer.echo(
        f"{'operator ' if operator else ''}key {name!r} created. It is shown only this once; "
        "clients send it as 'Authorization: Bearer <key>' (the OpenAI SDK's api_key).",
        err=True,
    )


@keys_app.command("update")
def keys_update(
    name: Annotated[str, typer.Argument(help="the key's name")],
    operator: Annotated[
        bool | None,
        typer.Option("--operator/--tenant", help="make it an operator key, or a tenant's"),
    ] = None,
    rpm: KeyRpm = None,
    tpm: KeyTpm = None,
    budget: KeyBudget = None,
    budget_period: KeyPeriod = None,
    db: KeysDb = None,
    config: KeysConfig = None,
) -> None:
    """Change a key's limits or role (what is not given stays); running servers apply it
    within seconds."""
    from toolwire.store.keys import BadLimit

    async def update() -> int:
        store = await _keys_store(db, config)
        try:
            return int(
                await store.keys.update(
                    name,
                    operator=operator,
                    rpm=rpm,
                    tpm=tpm,
                    budget=budget,
                    budget_period=budget_period,
                )
            )
        finally:
            await store.close()

    if all(v is None for v in (operator, rpm, tpm, budget, budget_period)):
        typer.echo("toolwire keys update: nothing to change (see --help)", err=True)
        raise typer.Exit(2)
    try:
        changed = asyncio.run(update())
    except BadLimit as exc:
        typer.echo(f"toolwire keys: {exc}", err=True)
        raise typer.Exit(2) from None
    if not changed:
        typer.echo(f"toolwire keys: no active key named {name!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"key {name!r} updated")


@keys_app.command("list")
def keys_list(db: KeysDb = None, config: KeysConfig = None) -> None:
    """The keys: name, id, first characters, role, created, revoked, and each limit with
    what was used of it (this minute, this budget period)."""

    async def listing() -> tuple[list[Any], dict[str, Any]]:
        store = await _keys_store(db, config)
        try:
            return list(await store.keys.listing()), await store.quotas.usage()
        finally:
            await store.close()

    keys, usage = asyncio.run(listing())
    if not keys:
        typer.echo("no keys: the server answers anyone who can reach it (loopback only)")
        return
    for key in keys:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(key.created_at))
        revoked = (
            "revoked " + time.strftime("%Y-%m-%d %H:%M", time.localtime(key.revoked_at))
            if key.revoked_at
            else "active"
        )
        role = "operator" if key.operator else "tenant"
        line = f"{key.name}\t{key.id}\t{key.prefix}…\t{role}\t{created}\t{revoked}"
        used = usage.get(key.id)
        limits = key.limits
        if used is not None:
            parts = []
            if limits.rpm is not None:
                parts.append(f"requests {used.requests_this_minute}/{limits.rpm} a minute")
            if limits.tpm is not None:
                parts.append(f"tokens {used.tokens_this_minute}/{limits.tpm} a minute")
            if limits.budget is not None:
                parts.append(
                    f"budget {used.budget_used}/{limits.budget} a {limits.budget_period or 'month'}"
                )
            line += "\t" + (", ".join(parts) if parts else "no limits")
        typer.echo(line)


@keys_app.command("revoke")
def keys_revoke(
    name: Annotated[str, typer.Argument(help="the key's name")],
    db: KeysDb = None,
    config: KeysConfig = None,
) -> None:
    """Revoke the key with this name; a running server refuses it within seconds."""

    async def revoke() -> int:
        store = await _keys_store(db, config)
        try:
            return int(await store.keys.revoke(name))
        finally:
            await store.close()

    if not asyncio.run(revoke()):
        typer.echo(f"toolwire keys: no active key named {name!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"key {name!r} revoked")


db_app = typer.Typer(
    no_args_is_help=True, help="The database of `toolwire serve`: schema migrations (Alembic)."
)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: KeysDb = None, config: KeysConfig = None) -> None:
    """Upgrade the database schema to this toolwire's (what `serve` does on start)."""
    from toolwire.config import load_config
    from toolwire.store.migrate import head

    async def upgrade() -> tuple[str | None, str]:
        from toolwire.store.database import Store

        store = await Store.open(load_config(config, {"db": db}).db, migrate=True)
        await store.close()
        return store.schema_before, head()

    try:
        before, after = asyncio.run(upgrade())
    except ToolwireError as exc:
        typer.echo(f"toolwire db: {exc.message}", err=True)
        raise typer.Exit(2) from None
    if before == after:
        typer.echo(f"database schema already at {after}")
    else:
        typer.echo(f"database schema upgraded: {before or '(none)'} -> {after}")


@app.command("mcp-serve")
def mcp_serve(
    root: Annotated[Path, typer.Option(help="the directory the tools work in")],
    http: Annotated[bool, typer.Option("--http", help="streamable HTTP instead of stdio")] = False,
    host: Annotated[str, typer.Option(help="bind address for --http")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port for --http (0 picks a free one)")] = 8765,
    allow_write: Annotated[
        bool, typer.Option("--allow-write", help="enable edit_file, create_file")
    ] = False,
    allow_exec: Annotated[bool, typer.Option("--allow-exec", help="enable exec")] = False,
) -> None:
    """Serve the workspace tools to any MCP client (stdio by default)."""
    from toolwire.tools.workspace.mcp_server import main as serve_workspace

    argv = ["--root", str(root), "--host", host, "--port", str(port)]
    argv += ["--http"] if http else []
    argv += ["--allow-write"] if allow_write else []
    argv += ["--allow-exec"] if allow_exec else []
    serve_workspace(argv)


@app.command("scripted-upstream")
def scripted_upstream(
    script: Annotated[
        Path, typer.Argument(help="JSON file: a list of turns (see docs/testing.md)")
    ],
    port: Annotated[int, typer.Option(help="0 picks a free port")] = 0,
) -> None:
    """Serve scripted chat-completions turns on loopback (for testing agents)."""
    from toolwire.testing.script import load_script
    from toolwire.testing.scripted import ScriptedUpstream

    server = ScriptedUpstream(
        load_script(json.loads(script.read_text(encoding="utf-8"))), port=port
    )
    with server:
        typer.echo(
            f"ScriptedUpstream serving {server.remaining} turns at {server.base_url}", err=True
        )
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


@app.command()
def demo(
    scripted: Annotated[
        bool, typer.Option("--scripted", help="a scripted model instead of the local one")
    ] = False,
    model_path: Annotated[
        Path | None, typer.Option(help="another GGUF file for the local model")
    ] = None,
    db: Annotated[
        str | None, typer.Option(help="database URL (default: the user data dir)")
    ] = None,
) -> None:
    """A short agent task, traced live: a real local model calls a weather tool through the
    gateway. `--scripted` runs a multi-tool task on a scripted model instead (no model needed)."""
    if scripted:
        raise typer.Exit(_scripted_demo())
    from rich.console import Console

    from toolwire.demo import run_local_demo
    from toolwire.upstream.local_llama import INSTALL_HINT, local_extra_installed

    if not local_extra_installed():
        typer.echo(f"toolwire demo: {INSTALL_HINT}; or try: toolwire demo --scripted", err=True)
        raise typer.Exit(2)
    try:
        status = asyncio.run(run_local_demo(model_path, db, Console(highlight=False)))
    except ToolwireError as exc:
        typer.echo(f"toolwire demo: {exc.message}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(status)


def _scripted_demo() -> int:
    from toolwire.demo_tools import ALL
    from toolwire.testing.script import WEATHER_DEMO
    from toolwire.testing.scripted import ScriptedUpstream

    prompt = "Is it warmer in Paris or in Oslo right now? Answer in Fahrenheit."
    with ScriptedUpstream(WEATHER_DEMO()) as server:
        typer.echo(f"toolwire demo: a scripted model at {server.base_url}\nprompt: {prompt}")
        status = asyncio.run(
            _run(server.base_url, "scripted-model", list(ALL), None, LoopSettings(), prompt)
        )
    return 0 if status == "completed" else 1


def main() -> None:
    """Run the CLI; an error escaping a command is said in a line or two (the traceback with
    --debug), and exits with status 2."""
    from toolwire.cli_errors import describe

    global _own_process
    _own_process = True
    try:
        app()
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:
        if _debug:
            raise
        command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
        typer.echo(
            f"toolwire {command}: {describe(exc)}".replace("toolwire :", "toolwire:"), err=True
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
