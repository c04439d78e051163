"""Property-based runs of schemathesis (`--checks all`) against a real `toolwire serve` on
loopback, in front of a `ScriptedUpstream` that answers every model call.

Against toolwire's own `/openapi.json`: no answer with status >= 500, no status the document
does not list, no answer that does not match it. Bounded for CI (`TOOLWIRE_FUZZ_EXAMPLES`
examples per operation, default 25, and a time budget); run longer by hand with e.g.
`TOOLWIRE_FUZZ_EXAMPLES=500 pytest tests/fuzz -s`.

`positive_data_acceptance` is given 400 as an expected status: many schema-valid requests are
refused on meaning, not shape (a `tool_choice` naming no tool, an `after` id that does not
exist, `background` without `store`, two items with one id); the check still runs, and 5xx
stays a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import openai_schemas
from tests.processes import free_port, wait_until_up
from toolwire.testing import Reply, ScriptedUpstream

EXAMPLES = int(os.environ.get("TOOLWIRE_FUZZ_EXAMPLES", "25"))
MAX_TIME = int(os.environ.get("TOOLWIRE_FUZZ_SECONDS", "75"))
SCHEMATHESIS = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "400", "404"]
"""

pytestmark = pytest.mark.skipif(not Path(SCHEMATHESIS).exists(), reason="needs schemathesis")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`toolwire serve` (its output to a file: a pipe nobody reads would stall it)."""
    tmp = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    with ScriptedUpstream(default=Reply(text="ok")) as upstream:
        log = (tmp / "serve.log").open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOOLWIRE_READ_TIMEOUT": "5"}
        args = ["serve", "--upstream", upstream.base_url, "--model", "scripted-model"]
        args += ["--db", f"sqlite:///{tmp / 'toolwire.db'}", "--port", str(port)]
        process = subprocess.Popen(
            [sys.executable, "-m", "toolwire", *args], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(base + "/health", process)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


def run_schemathesis(schema: str, base: str, tmp: Path, *extra: str) -> dict[str, Any]:
    """Run the CLI; the HAR of every exchange and the JSON report, summed up."""
    config = tmp / "schemathesis.toml"
    config.write_text(CONFIG)
    har, report = tmp / "run.har", tmp / "report.json"
    command = [
        SCHEMATHESIS,
        "--config-file",
        str(config),
        "run",
        schema,
        "--url",
        base,
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--max-time",
        str(MAX_TIME),
        "--workers",
        "2",
        "--seed",
        os.environ.get("TOOLWIRE_FUZZ_SEED", "20260821"),
        "--suppress-health-check",
        "all",
        "--report",
        "har,json",
        "--report-har-path",
        str(har),
        "--report-json-path",
        str(report),
        *extra,
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=MAX_TIME + 120, cwd=tmp)
    (tmp / "schemathesis.out").write_text(run.stdout + run.stderr)  # whole, for reading by hand
    entries = json.loads(har.read_text())["log"]["entries"] if har.exists() else []
    return {
        "output": run.stdout[-6000:] + run.stderr[-2000:],
        "report": json.loads(report.read_text()) if report.exists() else {},
        "statuses": [entry["response"]["status"] for entry in entries],
    }


def test_own_document(server: str, tmp_path: Path) -> None:
    document = httpx.get(server + "/openapi.json").json()
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(document))
    result = run_schemathesis(str(path), server, tmp_path)
    statuses, report = result["statuses"], result["report"]
    server_errors = [s for s in statuses if s >= 500]
    failures = {f["code"]: f for f in report.get("failures", [])}
    print(f"schemathesis: {len(statuses)} requests, {len(server_errors)} 5xx, failures {failures}")
    assert len(statuses) > 100, result["output"]
    assert not server_errors, result["output"]
    # The target: no 5xx, no undocumented status, no answer that breaks the document. Accepting
    # a value the document would not (ST201: a lax coercion somewhere deep in an item) is
    # "liberal in", reported by the run but not a failure here; the top-level request fields
    # are strict (server/responses/prepare/request.py) as OpenAI's are.
    lenient = {"ST201"}
    assert not set(failures) - lenient, result["output"]
    # Errors are schemathesis' own (hypothesis 6.170 can crash describing a strategy in the
    # coverage phase): shown, not failed on.
    if report.get("errors"):
        print("schemathesis errors:", report["errors"])


@pytest.mark.skipif(
    not os.environ.get("TOOLWIRE_FUZZ_OPENAI"), reason="by hand: TOOLWIRE_FUZZ_OPENAI=1"
)
def test_openai_document(server: str, tmp_path: Path) -> None:
    """OpenAI's own document, filtered to the operations toolwire serves (with the deviations
    tests/openai_schemas.py lists): no 5xx, and every answer matches its schema (no ST108)
    with an item type the document knows (no ST111). Statuses the document does not list
    (ST103: it lists only 200 for most operations, so every 4xx) and lax nested input
    (ST201) are printed, not failed on."""
    path = tmp_path / "openai.json"
    path.write_text(json.dumps(openai_schemas.document()))
    result = run_schemathesis(str(path), server + "/v1", tmp_path)
    statuses, report = result["statuses"], result["report"]
    server_errors = [s for s in statuses if s >= 500]
    failures = {f["code"]: (f["title"], f["count"]) for f in report.get("failures", [])}
    print(f"OpenAI document: {len(statuses)} requests, {len(server_errors)} 5xx, {failures}")
    assert len(statuses) > 100, result["output"]
    assert not server_errors, result["output"]
    assert not {"ST108", "ST111"} & set(failures), result["output"]
