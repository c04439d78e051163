"""`make fleet`: one toolwire in front of three simulated model servers on loopback, two
serving `model-a` and one `model-b` (the fleet benchmark's `fleet_mock.py`, whose answers and
prefix cache are made up), so that routing, affinity and failover can be watched without a GPU.

    python benchmarks/fleet_demo.py [--port 8080]

It prints the commands to try, then runs `toolwire serve --upstream ... --upstream ...` in the
foreground; Ctrl-C (or SIGTERM) stops toolwire and the three servers.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVERS = [("a1", "model-a"), ("a2", "model-a"), ("b", "model-b")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Until the server at `port` accepts connections (toolwire discovers each server's
    models at start, so they must answer before it starts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the mock server on port {port} exited ({process.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the mock server on port {port} did not start in {timeout:.0f} s")


def toolwire_command(port: int, upstreams: list[str], db: str) -> list[str]:
    """`toolwire serve` from the venv this script runs in (`make fleet` runs .venv's), on a
    database of the demo's own unless TOOLWIRE_DB names one: made-up answers stay out of
    the user's real store."""
    command = [sys.executable, "-m", "toolwire", "serve", "--port", str(port)]
    if not os.environ.get("TOOLWIRE_DB"):
        command += ["--db", f"sqlite:///{db}"]
    for url in upstreams:
        command += ["--upstream", url]
    return command


def interrupted(signum: int, frame: object) -> None:
    """SIGTERM ends the demo as Ctrl-C does: toolwire and the three servers stop."""
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, interrupted)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080, help="toolwire's port")
    args = parser.parse_args()
    mocks: list[subprocess.Popen[bytes]] = []
    try:
        upstreams = []
        for name, model in SERVERS:
            port = free_port()
            options = ["--port", str(port), "--name", name, "--model", model]
            mock = subprocess.Popen(
                [sys.executable, str(HERE / "fleet_mock.py"), *options, "--decode-interval", "0.01"]
            )
            mocks.append(mock)
            wait_listening(port, mock)
            upstreams.append(f"http://127.0.0.1:{port}/v1")
        base = f"http://127.0.0.1:{args.port}"
        print(
            f"==> three model servers: {', '.join(upstreams)}\n"
            f"==> try, once toolwire says it is listening:\n"
            f"  curl -s {base}/v1/models\n"
            f"  curl -s {base}/v1/chat/completions -H 'content-type: application/json' \\\n"
            """    -d '{"model": "model-b", "messages": [{"role": "user", "content": "hi"}]}'\n"""
            f"  curl -s {base}/metrics | grep toolwire_upstream\n"
            f"  and {base}/ui (the upstreams' state)",
            flush=True,
        )
        scratch = tempfile.mkdtemp(prefix="toolwire-fleet-")
        command = toolwire_command(args.port, upstreams, os.path.join(scratch, "toolwire.db"))
        toolwire = subprocess.Popen(command, env=os.environ.copy())
        try:
            return toolwire.wait()
        except KeyboardInterrupt:
            toolwire.send_signal(signal.SIGINT)
            return toolwire.wait()
    finally:
        for mock in mocks:
            mock.terminate()
        for mock in mocks:
            mock.wait()


if __name__ == "__main__":
    raise SystemExit(main())
