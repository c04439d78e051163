"""The upstream's key, quoted by the upstream in an error in every form a server may use
(`tests/secret_forms.py`: plain, JSON-escaped, base64 standard and URL-safe with and without
padding, hex, percent-encoded, HTTP Basic `user:key`, reversed, split), reaches no surface of a
real `toolwire serve`: the errors relayed on every door (streamed and not), the stored
responses and their `/ui` timelines, the database files, and the server's own output (request
logs, warnings, OpenTelemetry spans on the console exporter).

The attack (issue 39): base64, hex, percent-encoded, reversed, Basic and space-split forms in an
upstream error were relayed to clients on all three doors and stored in `responses` and
`run_timelines`."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.processes import free_port, output_so_far, toolwire_process
from tests.secret_forms import encodings, reveals
from toolwire.testing import Body, ScriptedUpstream

KEY = "sk-proj-Zx81Qa7TmL0p_Rw3Y-bN5cVd2E"
QUOTED = "Incorrect API key provided. We saw: " + " | ".join(
    f"{form}={text}" for form, text in encodings(KEY).items()
)
MESSAGES = [{"role": "user", "content": "hi"}]
#: door -> (path, path when streamed, body); the body gets `stream` where the path stays
DOORS: dict[str, tuple[str, str, dict[str, object]]] = {
    "responses": ("/v1/responses", "/v1/responses", {"model": "m", "input": "hi"}),
    "chat": (
        "/v1/chat/completions",
        "/v1/chat/completions",
        {"model": "m", "messages": MESSAGES},
    ),
    "messages": (
        "/v1/messages",
        "/v1/messages",
        {"model": "m", "max_tokens": 64, "messages": MESSAGES},
    ),
    "gemini": (
        "/v1beta/models/m:generateContent",
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    db = tmp_path_factory.mktemp("keyforms") / "toolwire.db"
    saved = dict(os.environ)
    os.environ.update(
        {
            "UPSTREAM_KEY_UNDER_TEST": KEY,
            "OTEL_TRACES_EXPORTER": "console",  # spans on the server's output
            "OTEL_BSP_SCHEDULE_DELAY": "50",  # written within 50 ms
            "TOOLWIRE_LOG_FORMAT": "json",
            "TOOLWIRE_MAX_RETRIES": "0",
        }
    )
    port = free_port()
    try:
        with ScriptedUpstream() as upstream:
            upstream.default = lambda body: Body({"error": {"message": QUOTED}}, status=400)
            args = ["serve", "--upstream", upstream.base_url, "--db", f"sqlite:///{db}"]
            args += ["--port", str(port), "--api-key-env", "UPSTREAM_KEY_UNDER_TEST"]
            base = f"http://127.0.0.1:{port}"
            with toolwire_process(*args, health=base + "/health") as process:
                yield base, db, process
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_no_form_of_the_key_reaches_any_surface(
    served: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    base, db, process = served
    seen: dict[str, str] = {}
    with httpx.Client(base_url=base, timeout=30) as client:
        for door, (path, streamed, body) in DOORS.items():
            for stream in (False, True):
                if path == streamed:
                    answer = client.post(path, json={**body, "stream": stream})
                else:
                    answer = client.post(streamed if stream else path, json=body)
                seen[f"{door} stream={stream}"] = answer.text
        # what the Responses door stored of a failed streamed response, and its timeline
        streamed = client.post("/v1/responses", json={"model": "m", "input": "x", "stream": True})
        created = orjson.loads(streamed.text.split("data: ", 1)[1].split("\n")[0])
        response_id = created["response"]["id"]
        seen["stored response"] = client.get(f"/v1/responses/{response_id}").text
        seen["its timeline"] = client.get(f"/ui/api/responses/{response_id}").text
    assert any("<redacted>" in text for text in seen.values()), seen  # errors were relayed
    assert any("Incorrect API key" in text for text in seen.values())
    for surface, text in seen.items():
        assert not reveals(text, KEY), (surface, text[:2000])
    files = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.is_file())
    assert not reveals(files.decode("latin-1"), KEY), "the database files"
    deadline = time.monotonic() + 10
    while "invoke_agent" not in (output := output_so_far(process)):  # the spans are written
        assert time.monotonic() < deadline, output[-3000:]
        time.sleep(0.05)
    assert not reveals(output, KEY), output[-3000:]
