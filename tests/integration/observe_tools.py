"""Server-side tools for the observability tests: one that always fails, one that waits for
approval. Loaded by the gateway process with `--tool tests.integration.observe_tools:ALL`."""

from __future__ import annotations

from toolwire.tools.base import tool


@tool
def flaky_lookup(key: str) -> str:
    """Always fails (a tool error for the metrics)."""
    raise RuntimeError(f"lookup of {key!r} failed")


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Deletes a file (needs a human's approval)."""
    return f"deleted {path}"


ALL = [flaky_lookup, delete_file]
