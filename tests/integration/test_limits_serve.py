"""Limits from a fresh `toolwire serve`: keys made and changed with `toolwire keys create /
update` (real CLI), refused with OpenAI's 429 on the WebSocket door too, and listed with their
usage by `toolwire keys list`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from tests.integration.conftest import running_gateway
from tests.minutes import start_in_a_fresh_minute_if_needed_async
from toolwire.testing import Reply


def keys(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", "keys", *args, "--db", f"sqlite:///{db}"],
        capture_output=True,
        text=True,
        check=False,
    )


async def test_websocket_door_refuses_over_the_limit_and_keys_list_shows_usage(
    tmp_path: Path,
) -> None:
    await start_in_a_fresh_minute_if_needed_async(30)  # both requests and the listing in one minute
    db = tmp_path / "toolwire.db"
    made = keys(db, "create", "team", "--rpm", "1", "--budget", "5000", "--budget-period", "day")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    bad = keys(db, "create", "other", "--budget-period", "fortnight")
    assert bad.returncode == 2 and "budget period must be one of" in bad.stderr
    with running_gateway(db) as gateway:
        gateway.upstream.default = Reply(text="ok")
        url = gateway.base_url.replace("http://", "ws://") + "/responses"
        headers = {"authorization": f"Bearer {key}"}
        async with websockets.connect(url, additional_headers=headers) as socket:
            events = []
            for text in ("first", "second"):
                await socket.send(
                    json.dumps({"type": "response.create", "model": "m", "input": text})
                )
                while True:
                    event = json.loads(await socket.recv())
                    if event["type"] in ("response.completed", "response.failed", "error"):
                        events.append(event)
                        break
        gateway.upstream.default = None
        listed = keys(db, "list")
    assert events[0]["type"] == "response.completed"
    assert events[1]["type"] == "error", events[1]
    assert events[1]["status"] == 429
    assert events[1]["error"]["code"] == "rate_limit_exceeded"
    assert listed.returncode == 0
    line = next(line for line in listed.stdout.splitlines() if line.startswith("team\t"))
    assert "tenant" in line and "requests 1/1 a minute" in line
    spent = int(line.split("budget ")[1].split("/")[0])
    assert 0 < spent <= 5000 and "/5000 a day" in line
    updated = keys(db, "update", "team", "--rpm", "0", "--operator")
    assert updated.returncode == 0, updated.stderr
    line = next(line for line in keys(db, "list").stdout.splitlines() if line.startswith("team"))
    assert "operator" in line and "requests" not in line


@pytest.mark.parametrize("args", [["update", "nobody", "--rpm", "5"], ["update", "team"]])
def test_keys_update_says_what_is_wrong(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "toolwire.db"
    assert keys(db, "create", "team").returncode == 0
    answer = keys(db, *args)
    assert answer.returncode in (1, 2)
    assert answer.stderr.startswith("toolwire keys")
