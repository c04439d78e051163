"""The CLI as a user runs it: real processes, real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.processes import free_port, toolwire_process


def test_demo_runs_a_traced_multi_tool_task() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolwire", "demo", "--scripted"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.count("envelope: get_weather") == 2
    assert "envelope: convert_temperature" in out
    assert "status:" in out and "toolName:" in out and "64.4 °F" in out
    assert "final answer" in out and "Paris is warmer" in out


def test_run_completes_a_multi_tool_task_against_a_scripted_upstream(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"reply": {"tool_calls": [["get_weather", {"city": "Oslo"}]]}},
                {"reply": {"tool_calls": [["convert_temperature", {"celsius": 4}]]}},
                {"reply": {"text": "Oslo: 4 °C, that is 39.2 °F."}},
            ]
        ),
        encoding="utf-8",
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with toolwire_process(
        "scripted-upstream", str(script), "--port", str(port), health=base + "/models"
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "toolwire",
                "run",
                "Weather in Oslo, in Fahrenheit?",
                "--upstream",
                base,
                "--model",
                "scripted-model",
                "--tool",
                "toolwire.demo_tools:ALL",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "envelope: get_weather" in done.stdout
    assert "temperature_c: 4" in done.stdout
    assert "39.2 °F" in done.stdout
    assert "completed" in done.stdout


def test_run_reports_an_unreachable_upstream_and_fails() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolwire",
            "run",
            "hi",
            "--upstream",
            f"http://127.0.0.1:{free_port()}/v1",
            "--model",
            "m",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "could not reach the upstream" in done.stdout
