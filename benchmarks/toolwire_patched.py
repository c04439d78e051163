"""`toolwire serve` with the benchmark's proposed fixes applied as monkeypatches (src/ untouched).

The benchmark may not edit `src/`; this launcher shows what each proposed change buys, measured
by the same harness (`run.py --patches ...`). Each patch mirrors a small change proposed for
`src/`; a patch whose change has since landed in `src/` is detected and skipped
(`--check LIST` prints, as JSON, which apply):

- `drain`: after `data: [DONE]` the upstream's body still holds the chunked-encoding terminator;
  `ChatCompletionsUpstream._streamed` stops reading at `[DONE]` and closes the response, so
  httpcore cannot return the connection to the pool and every model call opens (and closes) a
  new TCP connection. The patch reads the rest of the body (bounded: 50 ms) before closing.
  Proposed src change: in `_streamed`, keep iterating `aiter_raw()` to its end after `[DONE]`.
- `aiohttp`: the upstream client keeps httpx's API but sends through aiohttp
  (`httpx_aiohttp.AiohttpTransport`: aiohttp's C HTTP parser instead of httpcore + h11 + anyio).
  `src/` used this transport briefly and went back to httpx's own (commit b537ecf: a stream's
  events were lost after an upstream restart), so the stronger proposal is an upstream adapter
  on aiohttp itself (no httpx facade: compare the `aiohttp` and `httpx-aiohttp` floors), with
  its own error mapping and a test for that restart case. Needs aiohttp (`.pip-extras`).
- `shard`: keeps httpx's own transport but splits its pool into 32 small ones used in turn
  (`BENCH_HTTPX_SHARDS`).
  httpcore's `AsyncConnectionPool._assign_requests_to_connections` runs on every request and
  every response and checks every pooled connection (`has_expired` -> `is_socket_readable`, a
  `getpeername` through anyio's extra attributes), so its cost per request grows with the number
  of pooled connections: at concurrency 64 it is ~95% of toolwire's CPU (PROFILE.md).
  Proposed src change: the same sharding in `ChatCompletionsUpstream` (or aiohttp, above).
- `sink`: `ChatProxy.stream` passes every `LoopEvent` through an `asyncio.Queue` (a put, a get
  and a task wake-up per event), including the `ToolCallArgumentsDelta` of every streamed chunk
  that it then ignores. The patch drops the events the proxy does not use before the queue.
  Proposed src change: the same filter in `ChatProxy.stream` / `ChatProxy.complete`.
- `restarts`: `StreamAssembler._restarts` joins all argument parts so far and tries
  `orjson.loads` on them for every fragment that begins with `"`, `{` or `[` (most token-sized
  pieces of JSON do), which is quadratic in the arguments' length. The patch first checks that
  the text could be a whole object (last non-blank part ends with `}`) before joining/parsing.
  Proposed src change: the same two guards in `_restarts`.
- `uvloop`: `toolwire serve` runs `asyncio.run(...)`, i.e. the stdlib selector loop, although
  uvloop is installed (uvicorn[standard]); the patch runs the same coroutine on uvloop.
  Proposed src change: `asyncio.Runner(loop_factory=uvloop.new_event_loop)` in `cli.serve` when
  uvloop is importable (uvicorn's own `loop="auto"` only applies to `uvicorn.run`).

    .venv/bin/python benchmarks/toolwire_patched.py drain,uvloop serve --upstream URL --port P ...
    .venv/bin/python benchmarks/toolwire_patched.py --check drain,aiohttp,uvloop,sink,restarts
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent / ".pip-extras"))  # aiohttp, httpx-aiohttp

KNOWN = ("drain", "aiohttp", "shard", "uvloop", "sink", "restarts")


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
                except Exception:
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
        old = self._clients[0] if hasattr(self, "_clients") else self._client
        limits = httpx.Limits(
            max_connections=self.config.max_connections,
            max_keepalive_connections=self.config.max_connections,
            keepalive_expiry=60.0,
        )
        client = httpx.AsyncClient(
            base_url=old.base_url,
            headers=old.headers,
            timeout=old.timeout,
            transport=AiohttpTransport(limits=limits),
        )
        if hasattr(self, "_clients"):  # src/ shards its pools: one aiohttp pool needs no sharding
            self._clients = [client]
            self._next_client = lambda: client
        else:
            self._client = client

    ChatCompletionsUpstream.__init__ = __init__  # type: ignore[method-assign]


def patch_shard() -> None:
    import itertools

    import httpx

    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    original = ChatCompletionsUpstream.__init__
    shards = int(os.environ.get("BENCH_HTTPX_SHARDS", "32"))

    class Sharded:
        """Several small httpx pools used in turn: httpcore's pool bookkeeping scans every
        connection of a pool on every request and response, so its cost grows with the pool."""

        def __init__(self, clients: list[httpx.AsyncClient]) -> None:
            self.clients = clients
            self.next = itertools.cycle(clients).__next__

        def build_request(self, *args: Any, **kwargs: Any) -> httpx.Request:
            return self.clients[0].build_request(*args, **kwargs)

        async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
            return await self.next().send(request, **kwargs)

        async def request(self, *args: Any, **kwargs: Any) -> httpx.Response:
            return await self.next().request(*args, **kwargs)

        async def aclose(self) -> None:
            for client in self.clients:
                await client.aclose()

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        old = self._client
        per = max(1, self.config.max_connections // shards)
        limits = httpx.Limits(
            max_connections=per, max_keepalive_connections=per, keepalive_expiry=60.0
        )
        self._client = Sharded(
            [
                httpx.AsyncClient(
                    base_url=old.base_url, headers=old.headers, timeout=old.timeout, limits=limits
                )
                for _ in range(shards)
            ]
        )

    ChatCompletionsUpstream.__init__ = __init__  # type: ignore[method-assign]


def patch_sink() -> None:
    from toolwire.loop.events import LoopFinished, OutputTextDelta, ReasoningTextDelta
    from toolwire.server.chat_proxy import ChatProxy

    wanted = (OutputTextDelta, ReasoningTextDelta, LoopFinished)

    class FilteringDriver:
        def __init__(self, driver: Any) -> None:
            self.driver = driver

        async def run(self, request: Any, sink: Any) -> Any:
            return await self.driver.run(
                request, lambda e: sink(e) if isinstance(e, wanted) else None
            )

        def __getattr__(self, name: str) -> Any:
            return getattr(self.driver, name)

    original = ChatProxy.__init__

    def __init__(self: Any, driver: Any, *args: Any, **kwargs: Any) -> None:
        original(self, FilteringDriver(driver), *args, **kwargs)

    ChatProxy.__init__ = __init__  # type: ignore[method-assign]


def patch_restarts() -> None:
    from toolwire.upstream.arguments import is_complete_object
    from toolwire.upstream.assembler import StreamAssembler

    def ends_object(parts: list[str]) -> bool:
        for part in reversed(parts):
            stripped = part.rstrip()
            if stripped:
                return stripped.endswith("}")
        return False

    def _restarts(call: Any, fragment: str) -> bool:
        if call.obj is not None:
            return True
        if ends_object(call.parts) and is_complete_object("".join(call.parts)):
            return True
        if not fragment.rstrip().endswith("}"):
            return False
        built = "".join(call.parts)
        return fragment.lstrip().startswith(built.strip()) and is_complete_object(fragment)

    StreamAssembler._restarts = staticmethod(_restarts)  # type: ignore[method-assign]


def patch_uvloop() -> None:
    import uvloop

    def run(main: Any, *, debug: bool | None = None, **_: Any) -> Any:
        with asyncio.Runner(debug=debug, loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)

    asyncio.run = run  # type: ignore[assignment]


def landed(name: str) -> bool:
    """Is the change this patch stands for already in src/? (Then the patch is skipped.)"""
    import inspect

    if name in ("drain", "aiohttp"):
        from toolwire.upstream import chat_completions

        return (
            hasattr(chat_completions, "_drain")
            if name == "drain"
            else "AiohttpTransport" in vars(chat_completions)
        )
    if name == "uvloop":
        import toolwire.cli
        import toolwire.server.main

        return "uvloop" in inspect.getsource(toolwire.cli) + inspect.getsource(toolwire.server.main)
    if name == "restarts":
        from toolwire.upstream.assembler import StreamAssembler

        return 'endswith("}")' in inspect.getsource(StreamAssembler._restarts)
    if name == "shard":
        from toolwire.upstream import chat_completions

        return "_clients" in inspect.getsource(chat_completions)
    if name == "sink":
        from toolwire.server.chat_proxy import ChatProxy

        return "queue.put_nowait)" not in inspect.getsource(ChatProxy.stream)
    return False


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--check":
        import json

        print(
            json.dumps(
                {n: ("landed" if landed(n) else "applies") for n in sys.argv[2].split(",") if n}
            )
        )
        return
    patches = [p for p in sys.argv[1].split(",") if p]
    for name in patches:
        if name not in KNOWN:
            sys.exit(f"unknown patch {name!r}; known: {', '.join(KNOWN)}")
        if landed(name):
            print(f"toolwire_patched: {name} is already in src/, not patched", file=sys.stderr)
            continue
        globals()[f"patch_{name}"]()
    sys.argv = ["toolwire", *sys.argv[2:]]
    from toolwire.cli import main as toolwire_main

    toolwire_main()


if __name__ == "__main__":
    main()
