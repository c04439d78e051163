"""A child process's last words: its stderr kept in a temporary file, the tail quoted when it
dies (an MCP stdio server, the local model server). Silent while it runs; on failure the
user sees why ("No module named ...") instead of "Connection closed"."""

from __future__ import annotations

from typing import IO


def stderr_tail(errlog: IO[str], lines: int = 5, most: int = 800) -> str:
    """The last non-blank lines a child wrote to `errlog`, joined on one line, bounded."""
    errlog.flush()
    errlog.seek(0, 2)
    size = errlog.tell()
    errlog.seek(max(0, size - 20000))
    text = errlog.read()
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-most:]
