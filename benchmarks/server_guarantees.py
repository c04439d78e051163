"""What an HTTP server must do for toolwire, probed on each candidate with a raw ASGI app and raw
sockets (no toolwire code: the server's own behaviour, which no app can make up for).

    .venv/bin/python benchmarks/server_guarantees.py [--servers uvicorn,granian-asgi]

Probes, each against a fresh server process (`floors.serve`, as the floors run):

- **disconnect while working**: the client sends a whole request and closes before the answer;
  the app, working, awaits `receive()` (as `until_disconnected` does). Must: `http.disconnect`
  within 2 s (toolwire cancels the run, stores it cancelled, stops calling the upstream).
- **disconnect while streaming**: the client reads a little of an endless stream and closes.
  Must: the app learns it (a `send` raising `OSError`, ASGI 2.4, or `receive()` giving
  `http.disconnect`) within 2 s, so the run is cancelled.
- **back-pressure**: the client reads nothing of an endless 64 KiB-per-send stream. Must: the
  app's `send` stops returning after a bounded amount (the socket buffers), not buffer on.
- **keep-alive**: two requests on one connection.
- **WebSocket frame bound**: a frame bigger than the body limit is refused with close code 1009
  before the app sees it (uvicorn: `ws_max_size`), or at least reaches the app so the gate can
  close it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE / ".stack-extras"))

MAX_FRAME = 64 * 1024
CHUNK = b"x" * 65536


def make_app(report_path: str) -> Any:
    """Writes what the app saw to `report_path` (one JSON line per fact)."""

    def note(**fact: Any) -> None:
        with open(report_path, "a") as f:
            f.write(json.dumps(fact) + "\n")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket":
            message = await receive()
            await send({"type": "websocket.accept"})
            started = time.monotonic()
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    note(probe="ws", disconnect_code=message.get("code"))
                    return
                size = len(message.get("text") or message.get("bytes") or b"")
                note(probe="ws", app_received_bytes=size, after=time.monotonic() - started)
                if size > MAX_FRAME:
                    await send({"type": "websocket.close", "code": 1009})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"]
        while (await receive()).get("more_body"):
            pass
        if path == "/ok":
            body = b'{"ok":true}'
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        if path == "/work":
            started = time.monotonic()
            try:
                message = await asyncio.wait_for(receive(), 5)
                note(probe="work", got=message["type"], after=time.monotonic() - started)
            except TimeoutError:
                note(probe="work", got="nothing in 5 s")
            return
        # /stream: endless, as fast as the server takes it
        await send({"type": "http.response.start", "status": 200, "headers": []})
        sent = 0
        started = time.monotonic()

        async def listen() -> None:
            message = await receive()
            note(probe=path, receive=message["type"], after=time.monotonic() - started)

        listener = asyncio.get_running_loop().create_task(listen())
        try:
            while time.monotonic() - started < 6:
                await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
                sent += len(CHUNK)
                if path == "/stream-stalled" and sent % (1 << 20) == 0:
                    note(probe=path, sent=sent, after=time.monotonic() - started)
                if listener.done():
                    note(probe=path, stopped="receive said disconnect", sent=sent)
                    return
            note(probe=path, stopped="6 s passed", sent=sent)
        except OSError as exc:
            note(probe=path, send_raised=type(exc).__name__, sent=sent,
                 after=time.monotonic() - started)  # fmt: skip
        except Exception as exc:
            note(probe=path, send_raised_other=f"{type(exc).__name__}: {exc}", sent=sent)
        finally:
            listener.cancel()

    return app


def raw(port: int, request: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(request)
    return sock


def post(path: str) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{{}}".encode()


def probe(server: str) -> dict[str, Any]:
    from run import free_port

    report = Path(f"/tmp/server-guarantees-{os.getpid()}-{server}.jsonl")
    report.unlink(missing_ok=True)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", server, "--port", str(port), "--report", str(report)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            time.sleep(0.1)
        # keep-alive: two requests, one connection
        sock = raw(port, post("/ok"))
        first = sock.recv(65536)
        sock.sendall(post("/ok"))
        second = sock.recv(65536)
        out["keep-alive"] = b"200" in first and b"200" in second
        sock.close()
        # disconnect while working
        sock = raw(port, post("/work"))
        time.sleep(0.3)
        sock.close()
        # disconnect while streaming
        sock = raw(port, post("/stream"))
        sock.recv(65536)
        time.sleep(0.3)
        sock.close()
        # back-pressure: a client that reads nothing
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.connect(("127.0.0.1", port))
        sock.sendall(post("/stream-stalled"))
        time.sleep(3)
        sock.close()
        # a WebSocket frame over the bound
        out["ws"] = asyncio.run(ws_probe(port))
        time.sleep(2.5)
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    facts = (
        [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    )
    report.unlink(missing_ok=True)
    out["facts"] = facts
    return out


async def ws_probe(port: int) -> str:
    import websockets

    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None) as ws:
            await ws.send("y" * (MAX_FRAME * 4))
            try:
                await asyncio.wait_for(ws.recv(), 3)
            except websockets.ConnectionClosed as closed:
                return f"closed {closed.rcvd.code if closed.rcvd else None}"
            return "still open"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="uvicorn,granian-asgi")
    parser.add_argument("--serve")
    parser.add_argument("--port", type=int)
    parser.add_argument("--report")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.report)
        return
    for server in args.servers.split(","):
        print(server, json.dumps(probe(server), indent=1))


def serve(server: str, port: int, report: str) -> None:
    import uvloop

    app = make_app(report)
    if server == "uvicorn":
        import uvicorn

        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", ws="websockets-sansio",
            ws_max_size=MAX_FRAME,
        )  # fmt: skip
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(uvicorn.Server(config).serve())
        return
    from granian.constants import Interfaces
    from granian.log import LogLevels
    from granian.server.embed import Server

    async def run_embedded() -> None:
        embedded = Server(
            app, address="127.0.0.1", port=port, interface=Interfaces.ASGI,
            log_level=LogLevels.warning,
        )  # fmt: skip
        await embedded.serve()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run_embedded())


if __name__ == "__main__":
    main()
