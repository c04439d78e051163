"""`toolwire serve` with the benchmark's proposed fixes applied as monkeypatches (src/ untouched).

The benchmark may not edit `src/`; this launcher shows what each proposed change buys, measured
by the same harness (`run.py --compare-patches drain,uvloop`). Each patch mirrors a small change
proposed for `src/` (see the note in RESULTS.md):

- `drain`: after `data: [DONE]` the upstream's body still holds the chunked-encoding terminator;
  `ChatCompletionsUpstream._streamed` stops reading at `[DONE]` and closes the response, so
  httpcore cannot return the connection to the pool and every model call opens (and closes) a
  new TCP connection. The patch reads the rest of the body (bounded: 50 ms) before closing.
  Proposed src change: in `_streamed`, keep iterating `aiter_raw()` to its end after `[DONE]`.
- `aiohttp`: the upstream client keeps httpx's API but sends through aiohttp
  (`httpx_aiohttp.AiohttpTransport`: aiohttp's C HTTP parser instead of httpcore + h11 + anyio).
  Proposed src change: pass `transport=AiohttpTransport(...)` to the `httpx.AsyncClient` in
  `ChatCompletionsUpstream.__init__` (two dependencies: aiohttp, httpx-aiohttp), or talk to the
  upstream with aiohttp directly. Needs `benchmarks/.extra-site` (`run.py` installs it).
- `uvloop`: `toolwire serve` runs `asyncio.run(...)`, i.e. the stdlib selector loop, although
  uvloop is installed (uvicorn[standard]); the patch runs the same coroutine on uvloop.
  Proposed src change: `asyncio.Runner(loop_factory=uvloop.new_event_loop)` in `cli.serve` when
  uvloop is importable (uvicorn's own `loop="auto"` only applies to `uvicorn.run`).

    .venv/bin/python benchmarks/toolwire_patched.py drain,uvloop serve --upstream URL --port P ...
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent / ".extra-site"))  # aiohttp, httpx-aiohttp

KNOWN = ("drain", "uvloop", "aiohttp")


def patch_drain() -> None:
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    original = ChatCompletionsUpstream._open_stream

    async def _open_stream(self: Any, body: bytes) -> Any:
        response = await original(self, body)
        close = response.aclose

        async def aclose() -> None:
            if not response.is_closed:
                try:
                    async with asyncio.timeout(0.05):
                        async for _ in response.stream:
                            pass
                except Exception:  # noqa: S110 - a failed drain just means the connection is not reused
                    pass
            await close()

        response.aclose = aclose
        return response

    ChatCompletionsUpstream._open_stream = _open_stream  # type: ignore[method-assign]


def patch_aiohttp() -> None:
    import httpx
    from httpx_aiohttp import AiohttpTransport

    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    original = ChatCompletionsUpstream.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        old = self._client
        limits = httpx.Limits(max_connections=self.config.max_connections,
                              max_keepalive_connections=self.config.max_connections, keepalive_expiry=60.0)
        self._client = httpx.AsyncClient(base_url=old.base_url, headers=old.headers, timeout=old.timeout,
                                         transport=AiohttpTransport(limits=limits))

    ChatCompletionsUpstream.__init__ = __init__  # type: ignore[method-assign]


def patch_uvloop() -> None:
    import uvloop

    def run(main: Any, *, debug: bool | None = None, **_: Any) -> Any:
        with asyncio.Runner(debug=debug, loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)

    asyncio.run = run  # type: ignore[assignment]


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    patches = [p for p in sys.argv[1].split(",") if p]
    for name in patches:
        if name not in KNOWN:
            sys.exit(f"unknown patch {name!r}; known: {', '.join(KNOWN)}")
        globals()[f"patch_{name}"]()
    sys.argv = ["toolwire", *sys.argv[2:]]
    from toolwire.cli import main as toolwire_main

    toolwire_main()


if __name__ == "__main__":
    main()
