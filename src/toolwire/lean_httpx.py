"""Imported first by the package: httpx without its command line.

`import httpx` imports httpx's own command line (`httpx._main`: click, rich and pygments, ~4 MB
of a server's RSS) whenever those are installed; toolwire never runs it. Marked absent before
httpx is first imported, it makes httpx define its stand-in `main` instead. An `httpx` command
runs in a process of its own and is unaffected; a process that imported httpx first keeps it.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
