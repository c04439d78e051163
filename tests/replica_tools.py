"""Server-side tools for the replica tests (`--tool tests.replica_tools:ALL`): each run is
logged, one line per call, to the file named by TOOLWIRE_TEST_TOOL_LOG, so a test can count
how many times a tool really ran across processes."""

from __future__ import annotations

import os

from toolwire import tool


def _log(line: str) -> None:
    with open(os.environ["TOOLWIRE_TEST_TOOL_LOG"], "a", encoding="utf-8") as out:
        out.write(line + "\n")


@tool(needs_approval=True)
def guarded_write(text: str) -> str:
    """Write a note (a person must approve it)."""
    _log(f"guarded_write {text}")
    return f"wrote {text}"


@tool
def note_step(text: str) -> str:
    """Note a step."""
    _log(f"note_step {text}")
    return f"noted {text}"


ALL = [guarded_write, note_step]
