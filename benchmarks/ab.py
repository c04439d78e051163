"""Interleaved A/B of two toolwire source trees on one machine, in one run: for a change measured
under noise (a shared machine), ratios of the same run are the figure, not absolutes.

    .venv/bin/python benchmarks/ab.py --a /tmp/base/src --b src --workload chat --rounds 8

Both servers run against one mock upstream (`mock_upstream.py`); each round sends a block of
sequential requests to A, then to B (the order alternating), and reads each server's CPU time
from /proc before and after its block. Workloads: `chat`, `chat-stream`, `chat-long`, `resp`,
`resp-stream`, `resp-long`, and `resp-continue` (each request continues one stored response
with its tool's output, `previous_response_id`: a read of the stored history and a write). Reports, per variant, the median over rounds of the
per-round p50 latency and of CPU per request, and the median of the per-round B/A ratios.
`--concurrency N` adds a block of N concurrent connections per round (CPU per request there).
`--a-env` / `--b-env KEY=VALUE`: an environment variable for one variant only (the same tree
twice with `TOOLWIRE_UPSTREAM_CLIENT=pyreqwest` for B compares the upstream clients).
`rss_mb`: each server's resident memory after its round. Prints the load average before and after (other work on the machine moves absolutes, less so
the per-round ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
from run import MESSAGES, RESPONSES_TOOLS, STREAM_CHUNKS, TOOLS  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """The process's CPU time, every thread's, in nanoseconds' resolution (`schedstat`): the
    clock ticks of `/proc/PID/stat` (10 ms) are ~10% of a 150-request block's CPU."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def wait_up(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until something listens on `port` (also `growth.py`'s); the process exiting first ends
    the benchmark."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server on {port} exited: {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise SystemExit(f"server on {port} did not start")


def body_for(workload: str) -> tuple[str, dict[str, Any], bool, str]:
    """(path, body, stream, kind) of a workload."""
    if workload in ("chat", "chat-stream", "chat-long"):
        model = "mock-stream" if workload == "chat-long" else "mock-tool"
        stream = workload != "chat"
        body = {"model": model, "messages": MESSAGES, "tools": TOOLS, "stream": stream}
        return "/v1/chat/completions", body, stream, "chat"
    stream = workload not in ("resp", "resp-continue")
    model = "mock-stream" if workload == "resp-long" else "mock-tool"
    body = {"model": model, "input": "What is the weather in Paris?", "tools": RESPONSES_TOOLS}
    if stream:
        body["stream"] = True
    return "/v1/responses", body, stream, "responses"


def continuing(port: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` made a continuation of a response stored first on the server at `port`: its
    tool call answered, with `previous_response_id`."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/responses",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        stored = json.load(answer)
    call = next(item for item in stored["output"] if item["type"] == "function_call")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"temp": 21}'}
    return {**body, "previous_response_id": stored["id"], "input": [output]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="src/ directory of variant A")
    parser.add_argument("--b", required=True, help="src/ directory of variant B")
    parser.add_argument("--workload", default="chat")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument(
        "--pin",
        action="store_true",
        help="both servers on the first CPU, the mock and the load generator on the second "
        "(figures per core, as run.py's)",
    )
    parser.add_argument(
        "--a-env", action="append", default=[], help="KEY=VALUE for variant A only (repeatable)"
    )
    parser.add_argument(
        "--b-env", action="append", default=[], help="KEY=VALUE for variant B only (repeatable)"
    )
    args = parser.parse_args()

    python = str(HERE.parent / ".venv" / "bin" / "python")
    load_before = loadavg()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus: set[int] | None = None
    if args.pin and len(cpus) >= 2:
        server_cpus = {cpus[0]}
        os.sched_setaffinity(0, {cpus[1]})  # this process (the load generator) and the mock
    tmp = Path(tempfile.mkdtemp(prefix="ab-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        mock_port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    python,
                    str(HERE / "mock_upstream.py"),
                    "--port",
                    str(mock_port),
                    "--chunks",
                    str(STREAM_CHUNKS),
                ],
                stdout=subprocess.DEVNULL,
            )
        )
        wait_up(mock_port, procs[-1])
        servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
        for name, src, extra in (("A", args.a, args.a_env), ("B", args.b, args.b_env)):
            port = free_port()
            env = {
                **os.environ,
                "PYTHONPATH": str(Path(src).resolve()),
                "TOOLWIRE_LOG_LEVEL": "warning",
                **dict(pair.split("=", 1) for pair in extra),
            }
            proc = subprocess.Popen(
                [
                    python,
                    "-m",
                    "toolwire",
                    "serve",
                    "--upstream",
                    f"http://127.0.0.1:{mock_port}/v1",
                    "--db",
                    f"sqlite:///{tmp}/{name}.db",
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=(lambda: os.sched_setaffinity(0, server_cpus)) if server_cpus else None,
            )
            procs.append(proc)
            wait_up(port, proc)
            servers[name] = (port, proc)
        path, body, stream, kind = body_for(args.workload)
        bodies = {name: body for name in servers}
        if args.workload == "resp-continue":
            bodies = {name: continuing(port, body) for name, (port, _) in servers.items()}
        expected = json.dumps({"city": "Paris", "unit": "celsius"})
        if args.workload.endswith("long"):
            from mock_upstream import long_arguments

            expected = long_arguments(STREAM_CHUNKS - 4)[0]
        rows: dict[str, dict[str, list[float]]] = {
            n: {"p50_us": [], "cpu_us": [], "cpu_c_us": [], "rps_c": [], "rss_mb": []}
            for n in servers
        }
        for round_no in range(args.rounds + 1):  # round 0 warms up
            order = ["A", "B"] if round_no % 2 == 0 else ["B", "A"]
            for name in order:
                port, proc = servers[name]
                url = f"http://127.0.0.1:{port}{path}"
                spec = {
                    "targets": {name: url},
                    "body": bodies[name],
                    "stream": stream,
                    "kind": kind,
                    "expected_args": expected,
                    "warmup": 5,
                    "requests": args.requests,
                    "block": args.requests,
                }
                before = cpu_seconds(proc.pid)
                result = loadgen.sequential(spec)[name]
                used = cpu_seconds(proc.pid) - before
                if result["errors"] or result["bad"]:
                    raise SystemExit(f"{name}: {result['why']}")
                if round_no:
                    rows[name]["rss_mb"].append(rss_mb(proc.pid))
                    rows[name]["p50_us"].append(statistics.median(result["total_us"]))
                    rows[name]["cpu_us"].append(used / (args.requests + 5) * 1e6)
                if args.concurrency:
                    before = cpu_seconds(proc.pid)
                    raw = json.dumps(bodies[name]).encode()
                    thr = loadgen.throughput(url, raw, args.concurrency, args.seconds)
                    used = cpu_seconds(proc.pid) - before
                    if round_no and thr["requests"]:
                        rows[name]["cpu_c_us"].append(used / thr["requests"] * 1e6)
                        rows[name]["rps_c"].append(thr["rps"])
        print(
            f"load average before {load_before}, after {loadavg()}; "
            f"workload {args.workload}: {args.rounds} rounds x {args.requests} requests"
            + (f", c={args.concurrency} for {args.seconds}s" if args.concurrency else "")
        )
        for metric in ("p50_us", "cpu_us", "cpu_c_us", "rps_c", "rss_mb"):
            if not rows["A"][metric]:
                continue
            a, b = rows["A"][metric], rows["B"][metric]
            ratios = [y / x for x, y in zip(a, b, strict=True) if x]
            print(
                f"  {metric:9s} A {statistics.median(a):9.1f}  B {statistics.median(b):9.1f}"
                f"  B/A median {statistics.median(ratios):.3f}"
                f"  (per round: {' '.join(f'{r:.2f}' for r in ratios)})"
            )
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.set_event_loop_policy(None)
        main()
