"""The OpenResponses compliance suite, run by its own runner against a real `toolwire serve`.

The suite (vendored, pinned: tests/conformance/openresponses/, see its NOTICE) is a TypeScript
program run by bun: it sends its 17 requests at once over HTTP, SSE and WebSocket mode, checks
every response object and stream event against its Zod schemas, and prints its results as JSON.
bun and zod are installed, pinned, into .tools/openresponses by .ci/install-openresponses
(called here when they are missing; without npm the test skips, saying why).

The upstream is a ScriptedUpstream whose turn depends on the request (the suite's requests come
in no fixed order): a request offering tools gets a `get_weather` call, any other a short text.
The server has an API key, so every request of the suite, WebSocket upgrades included, is
authenticated.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.processes import free_port, toolwire_process
from toolwire.store.database import Store
from toolwire.testing import Reply, ScriptedUpstream

ROOT = Path(__file__).parents[2]
SUITE = ROOT / "tests" / "conformance" / "openresponses"
TOOLS = ROOT / ".tools" / "openresponses"
BUN = TOOLS / "node_modules" / ".bin" / "bun"

ALL_TESTS = {
    "basic-response",
    "assistant-phase",
    "response-output-phase-schema",
    "streaming-response",
    "websocket-response",
    "websocket-sequential-responses",
    "websocket-continuation",
    "websocket-reconnect-store-false-recovery",
    "websocket-previous-response-not-found",
    "websocket-failed-continuation-evicts-cache",
    "websocket-compact-new-chain",
    "system-prompt",
    "tool-calling",
    "image-input",
    "multi-turn",
    "compact-response",
    "compact-missing-model",
}
#: Tests that need what toolwire does not serve yet, each with the reason (none now). Strict:
#: once one passes, the test says so, and its entry goes.
EXPECTED_TO_FAIL: dict[str, str] = {}


def bun_binary() -> Path:
    if not BUN.exists() or not (TOOLS / "node_modules" / "zod").exists():
        if shutil.which("npm") is None:
            pytest.skip("the OpenResponses compliance suite needs npm to install bun (not found)")
        subprocess.run([str(ROOT / ".ci" / "install-openresponses")], check=True, timeout=300)
    if not BUN.exists():
        pytest.skip("bun could not be installed into .tools/openresponses")
    return BUN


def respond(body: Any) -> Reply:
    """A tool call when the request offers tools, else a short answer."""
    if isinstance(body, dict) and body.get("tools"):
        return Reply(tool_calls=[("get_weather", {"location": "San Francisco, CA"})])
    return Reply(text="OK")


def make_key(db: Path) -> str:
    async def create() -> str:
        store = await Store.open(f"sqlite:///{db}")
        try:
            return (await store.keys.create("openresponses"))[1]
        finally:
            await store.close()

    return asyncio.run(create())


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    bun = bun_binary()
    work = tmp_path_factory.mktemp("openresponses")
    suite = work / "suite"
    shutil.copytree(SUITE, suite)
    (suite / "node_modules").symlink_to(TOOLS / "node_modules")  # zod, found from the suite
    db = work / "toolwire.db"
    key = make_key(db)
    port = free_port()
    with ScriptedUpstream(default=respond) as upstream:
        args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
        base = f"http://127.0.0.1:{port}"
        with toolwire_process(*args, "--port", str(port), health=base + "/health"):
            suite_args = ["--json", "--base-url", base + "/v1", "--api-key", key]
            run = subprocess.run(
                [str(bun), "run", "bin/compliance-test.ts", *suite_args, "--model", "m"],
                cwd=suite,
                capture_output=True,
                text=True,
                timeout=120,
                env={"PATH": str(bun.parent) + ":/usr/bin:/bin", "NO_COLOR": "1"},
            )
    assert run.stdout.strip(), f"the runner printed nothing: {run.stderr}"
    report = json.loads(run.stdout)
    yield {result["id"]: result for result in report["results"]}


def test_the_suite_ran_all_its_tests(results: dict[str, dict[str, Any]]) -> None:
    assert set(results) == ALL_TESTS


@pytest.mark.parametrize(
    "test_id",
    [
        pytest.param(
            test_id,
            marks=[pytest.mark.xfail(strict=True, reason=EXPECTED_TO_FAIL[test_id])]
            if test_id in EXPECTED_TO_FAIL
            else [],
        )
        for test_id in sorted(ALL_TESTS)
    ],
)
def test_compliance(results: dict[str, dict[str, Any]], test_id: str) -> None:
    result = results[test_id]
    assert result["status"] == "passed", json.dumps(result, indent=1)[:4000]
