"""The serving process loads no package it does not use (issue #38: its RSS counts against a
100 MB target): OpenTelemetry only when tracing is asked for, Alembic only when a schema must
change (not to stamp a new database), llguidance only for a `custom` tool's grammar,
cryptography only when something is sealed, aiohttp only for an `https://` upstream."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import asyncio, json, sys, tempfile
from toolwire.observe.setup import Observability
import toolwire.server.main  # everything `toolwire serve` imports to build and run the app
from toolwire.store.database import Store

async def fresh_store():
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(f"sqlite:///{tmp}/new.db")
        await store.close()

asyncio.run(fresh_store())
observability = Observability.from_env(upstream_name="u", tools=[], log_format="text")
print(json.dumps({
    "tracing": observability.tracing is not None,
    "loaded": sorted({m.split(".")[0] for m in sys.modules}
                     & {"opentelemetry", "alembic", "llguidance", "cryptography", "aiohttp"}),
}))
"""


def probe(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_the_server_imports_no_tracing_sdk_grammar_checker_or_crypto_until_used() -> None:
    assert probe() == {"tracing": False, "loaded": []}


def test_tracing_asked_for_loads_opentelemetry() -> None:
    found = probe(OTEL_TRACES_EXPORTER="console")
    assert found["tracing"] is True
    assert found["loaded"] == ["opentelemetry"]


UPSTREAM_PROBE = """
import asyncio, json, sys
import toolwire.server.main
from toolwire.upstream.chat_completions import ChatCompletionsUpstream

async def main():
    upstream = ChatCompletionsUpstream(sys.argv[1])
    loaded = "aiohttp" in sys.modules
    try:  # nothing listens on port 9 (discard): the request fails, after choosing its client
        await upstream._sender.send("GET", sys.argv[1] + "/models", None, None)
        fault = None
    except Exception as exc:
        fault = type(exc).__name__
    await upstream.aclose()
    print(json.dumps([loaded, "aiohttp" in sys.modules, fault]))

asyncio.run(main())
"""


def aiohttp_loaded(base_url: str) -> list[object]:
    """Whether aiohttp is loaded once the adapter is made, and after its first request; the
    fault that request met (httpx's class, whichever client sent it)."""
    done = subprocess.run(
        [sys.executable, "-c", UPSTREAM_PROBE, base_url], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_an_http_upstream_never_loads_aiohttp() -> None:
    assert aiohttp_loaded("http://127.0.0.1:9/v1") == [False, False, "ConnectError"]


def test_an_https_upstream_loads_aiohttp_at_its_first_request() -> None:
    assert aiohttp_loaded("https://127.0.0.1:9/v1") == [False, True, "ConnectError"]
