"""The serving process loads no package it does not use (issue #38: its RSS counts against a
100 MB target): OpenTelemetry only when tracing is asked for, Alembic only when a schema must
change (not to stamp a new database), llguidance only for a `custom` tool's grammar,
cryptography only when something is sealed."""

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
                     & {"opentelemetry", "alembic", "llguidance", "cryptography"}),
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
