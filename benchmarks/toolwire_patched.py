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
- (`aiohttp` and `shard`, the two fixes for httpcore's per-request pool scans, are gone: the
  upstream client is aiohttp since issue #19, src/toolwire/upstream/transport.py.)
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
    .venv/bin/python benchmarks/toolwire_patched.py --check drain,uvloop,sink,restarts
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

KNOWN = ("drain", "uvloop", "sink", "restarts")


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


def patch_sink() -> None:
    from toolwire.loop.events import LoopFinished, OutputTextDelta, ReasoningTextDelta
    from toolwire.server.chat.proxy import ChatProxy

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

    if name == "drain":
        from toolwire.upstream import chat_completions

        return hasattr(chat_completions, "_drain")
    if name == "uvloop":
        import toolwire.cli
        import toolwire.server.main

        return "uvloop" in inspect.getsource(toolwire.cli) + inspect.getsource(toolwire.server.main)
    if name == "restarts":
        from toolwire.upstream.assembler import StreamAssembler

        return 'endswith("}")' in inspect.getsource(StreamAssembler._restarts)
    if name == "sink":
        from toolwire.server.chat.proxy import ChatProxy

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
