"""Per streamed chunk end to end, on loopback, for two source trees interleaved: what run.py's
workloads (b) and (f) say per chunk, on a shared machine (ratios of one run, not absolutes).

    .venv/bin/python benchmarks/chunk_e2e.py --a /tmp/base/src --b src --rounds 6 --pin

One mock upstream (`mock_upstream.py`, 500 chunks) and one `toolwire serve` per tree. Each
round, each server (the order alternating) answers four blocks of sequential requests: (a) the
chat door's non-streamed tool call, (b) its 500-chunk stream, (d) `/v1/responses` streaming the
short call and (f) the 500-chunk stream through `/v1/responses` with a `strict` tool and
`TOOLWIRE_STRICT_TOOLS=enforced`, so the argument deltas stream live (a delta per read). The
mock itself answers (a) and (b) too ("direct"). Per chunk, as run.py computes it for (b):

    latency: ((b) p50 - direct (b) p50 - ((a) p50 - direct (a) p50)) / 500
    CPU:     ((b) server CPU per request - (a)'s) / 500

and for (f) the same less (d) rather than (a): a Responses stream's own per-request work (its
stored response, its events) is not per chunk.

Prints the median over rounds of each figure per tree, and of the per-round B/A ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
from ab import cpu_seconds, free_port, loadavg, wait_up  # noqa: E402
from mock_upstream import SHORT_ARGS, long_arguments  # noqa: E402
from run import MESSAGES, RESPONSES_TOOLS, STREAM_CHUNKS, TOOLS  # noqa: E402

LONG_ARGS = long_arguments(STREAM_CHUNKS - 4)[0]
# (f)'s tools: `write_file` strict (its schema closed, as `strict` asks), so with the upstream
# said to enforce it the call is not judged first and its deltas leave as they arrive
STRICT_TOOLS = [
    {
        **tool,
        "strict": True,
        "parameters": {**tool["parameters"], "additionalProperties": False},
    }
    if tool["name"] == "write_file"
    else tool
    for tool in RESPONSES_TOOLS
]
WORKLOADS: dict[str, tuple[str, dict[str, Any], bool, str, str]] = {
    # name: (path, body, stream, kind, expected arguments)
    "a": (
        "/v1/chat/completions",
        {"model": "mock-tool", "messages": MESSAGES, "tools": TOOLS},
        False,
        "chat",
        SHORT_ARGS,
    ),
    "b": (
        "/v1/chat/completions",
        {"model": "mock-stream", "messages": MESSAGES, "tools": TOOLS, "stream": True},
        True,
        "chat",
        LONG_ARGS,
    ),
    "d": (
        "/v1/responses",
        {"model": "mock-tool", "input": "Weather?", "tools": STRICT_TOOLS, "stream": True},
        True,
        "responses",
        SHORT_ARGS,
    ),
    "f": (
        "/v1/responses",
        {"model": "mock-stream", "input": "Write the file.", "tools": STRICT_TOOLS, "stream": True},
        True,
        "responses",
        LONG_ARGS,
    ),
}


def block(url: str, workload: str, requests: int) -> dict[str, Any]:
    path, body, stream, kind, expected = WORKLOADS[workload]
    spec = {
        "targets": {"t": url + path},
        "body": body,
        "stream": stream,
        "kind": kind,
        "expected_args": expected,
        "warmup": 3,
        "requests": requests,
        "block": requests,
    }
    result: dict[str, Any] = loadgen.sequential(spec)["t"]
    if result["errors"] or result["bad"]:
        raise SystemExit(f"{url} {workload}: {result['why']}")
    return result


def start_server(
    python: str, src: str, mock_port: int, db: Path, cpus: set[int] | None
) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(src).resolve()),
        "TOOLWIRE_LOG_LEVEL": "warning",
        "TOOLWIRE_STRICT_TOOLS": "enforced",
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
            f"sqlite:///{db}",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    wait_up(port, proc)
    return port, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="src/ directory of variant A")
    parser.add_argument("--b", required=True, help="src/ directory of variant B")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=30, help="per workload, per round")
    parser.add_argument(
        "--pin", action="store_true", help="servers on the first CPU, mock and client on the second"
    )
    args = parser.parse_args()

    python = str(HERE.parent / ".venv" / "bin" / "python")
    load_before = loadavg()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus: set[int] | None = None
    if args.pin and len(cpus) >= 2:
        server_cpus = {cpus[0]}
        os.sched_setaffinity(0, {cpus[1]})
    tmp = Path(tempfile.mkdtemp(prefix="chunk-e2e-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        mock_port = free_port()
        mock_argv = [python, str(HERE / "mock_upstream.py"), "--port", str(mock_port)]
        procs.append(subprocess.Popen(mock_argv, stdout=subprocess.DEVNULL))
        wait_up(mock_port, procs[-1])
        mock = f"http://127.0.0.1:{mock_port}/v1"
        servers = {}
        for name, src in (("A", args.a), ("B", args.b)):
            port, proc = start_server(python, src, mock_port, tmp / f"{name}.db", server_cpus)
            procs.append(proc)
            servers[name] = (f"http://127.0.0.1:{port}", proc)
        rows: dict[str, dict[str, list[float]]] = {
            name: {"b_us": [], "f_us": [], "b_cpu": [], "f_cpu": []} for name in servers
        }
        per = STREAM_CHUNKS
        for round_no in range(args.rounds + 1):  # round 0 warms up
            direct = {w: block(mock[: -len("/v1")], w, args.requests) for w in ("a", "b")}
            direct_us = {w: statistics.median(r["total_us"]) for w, r in direct.items()}
            for name in ["A", "B"] if round_no % 2 == 0 else ["B", "A"]:
                url, proc = servers[name]
                p50, cpu = {}, {}
                for workload in WORKLOADS:
                    before = cpu_seconds(proc.pid)
                    result = block(url, workload, args.requests)
                    cpu[workload] = (cpu_seconds(proc.pid) - before) / (args.requests + 3) * 1e6
                    p50[workload] = statistics.median(result["total_us"])
                if not round_no:
                    continue
                stream_us = direct_us["b"] - direct_us["a"]  # the mock's own 500 chunks
                rows[name]["b_us"].append((p50["b"] - p50["a"] - stream_us) / per)
                rows[name]["f_us"].append((p50["f"] - p50["d"] - stream_us) / per)
                rows[name]["b_cpu"].append((cpu["b"] - cpu["a"]) / per)
                rows[name]["f_cpu"].append((cpu["f"] - cpu["d"]) / per)
        print(
            f"load average before {load_before}, after {loadavg()}; {args.rounds} rounds x "
            f"{args.requests} requests a workload; µs per chunk (b: chat door, f: Responses, "
            "live deltas; _us: added p50 latency, _cpu: server CPU)"
        )
        for metric in ("b_us", "f_us", "b_cpu", "f_cpu"):
            a, b = rows["A"][metric], rows["B"][metric]
            ratios = [y / x for x, y in zip(a, b, strict=True) if x > 0]
            print(
                f"  {metric:6s} A {statistics.median(a):6.2f}  B {statistics.median(b):6.2f}"
                f"  B/A median {statistics.median(ratios) if ratios else float('nan'):.3f}"
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
    main()
