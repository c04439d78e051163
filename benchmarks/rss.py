"""Peak RSS of `toolwire serve` under run.py's throughput load, for two source trees side by side
(issue #38's "RSS under load" target, without the full run).

    .venv/bin/python benchmarks/rss.py --a /tmp/base/src --b src --pin

Both servers start as run.py starts toolwire (`python -m toolwire serve --upstream MOCK --db
sqlite:///… --port P`, `TOOLWIRE_LOG_LEVEL=warning`) against one mock upstream. Each first
serves what run.py sends before its throughput points (`--warm` requests of each door: chat,
streamed chat, /v1/responses JSON and streamed, the 500-chunk streamed call, Messages and
Gemini, JSON and streamed; `--warm 0` for a chat-only server), then its idle RSS is read, then
wrk posts run.py's chat body at each `--levels` concurrency for `--seconds`, A and B
alternating, while a thread samples each server's RSS (process and children, as run.py's
`RssSampler`) every 100 ms. Prints idle and peak RSS per level, the anonymous and file-backed
parts at the end (`/proc/PID/status`), and each round's B - A. `--rounds N` repeats it with
fresh servers (a peak is one process's figure: the rounds show its spread).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
from ab import free_port, loadavg, wait_up  # noqa: E402
from mock_upstream import SHORT_ARGS, long_arguments  # noqa: E402
from run import (  # noqa: E402
    ANTHROPIC_TOOLS,
    GEMINI_TOOLS,
    MESSAGES,
    RESPONSES_TOOLS,
    STREAM_CHUNKS,
    TOOLS,
    WRK_SCRIPT,
)

CHAT = {"model": "mock-tool", "messages": MESSAGES, "tools": TOOLS}


def status_kb(pid: int, field: str) -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (a `--workers` server's processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
    return out


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    return sum(status_kb(p, field) for p in tree(pid)) / 1024


class Peak:
    """The highest RSS of one process tree while `watch` is set, sampled every 100 ms."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, rss_mb(self.pid))

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def warm_specs(count: int) -> list[dict[str, Any]]:
    """run.py's sequential workloads before its throughput points, `count` requests each."""
    long_args = long_arguments(STREAM_CHUNKS - 4)[0]
    resp = {
        "model": "mock-tool",
        "input": "What is the weather in Paris?",
        "tools": RESPONSES_TOOLS,
    }
    messages = {
        "max_tokens": 1024,
        "system": MESSAGES[0]["content"],
        "messages": [MESSAGES[1]],
        "tools": ANTHROPIC_TOOLS,
    }
    gemini = {
        "systemInstruction": {"parts": [{"text": MESSAGES[0]["content"]}]},
        "contents": [{"role": "user", "parts": [{"text": MESSAGES[1]["content"]}]}],
        "tools": GEMINI_TOOLS,
    }
    rows = [
        ("/v1/chat/completions", CHAT, False, "chat", SHORT_ARGS),
        (
            "/v1/chat/completions",
            {**CHAT, "model": "mock-stream", "stream": True},
            True,
            "chat",
            long_args,
        ),
        ("/v1/responses", resp, False, "responses", SHORT_ARGS),
        ("/v1/responses", {**resp, "stream": True}, True, "responses", SHORT_ARGS),
        (
            "/v1/responses",
            {**resp, "model": "mock-stream", "stream": True},
            True,
            "responses",
            long_args,
        ),
        ("/v1/messages", {**messages, "model": "mock-tool"}, False, "messages", SHORT_ARGS),
        (
            "/v1/messages",
            {**messages, "model": "mock-stream", "stream": True},
            True,
            "messages",
            long_args,
        ),
        ("/v1beta/models/mock-tool:generateContent", gemini, False, "gemini", SHORT_ARGS),
        (
            "/v1beta/models/mock-stream:streamGenerateContent?alt=sse",
            gemini,
            True,
            "gemini",
            long_args,
        ),
    ]
    return [
        {"path": p, "body": b, "stream": s, "kind": k, "expected_args": e, "requests": count}
        for p, b, s, k, e in rows
    ]


def wrk(url: str, concurrency: int, seconds: float, scratch: Path, cpus: set[int] | None) -> float:
    """wrk as run.py runs it (one thread, run.py's Lua script and chat body): requests/s."""
    body = scratch / "body.json"
    body.write_text(json.dumps(CHAT))
    script = scratch / "post.lua"
    script.write_text(WRK_SCRIPT % (body, ""))
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise SystemExit(f"wrk failed: {done.stdout[-500:]} {done.stderr[-500:]}")
    w = json.loads(line[8:])
    if w["status"] or w["connect"] or w["read"] or w["write"] or w["timeout"]:
        raise SystemExit(f"wrk errors at {url}: {w}")
    return float(w["requests"]) / (float(w["duration_us"]) / 1e6)


def one_round(
    args: argparse.Namespace, mock_port: int, scratch: Path
) -> dict[str, dict[str, float]]:
    python = str(HERE.parent / ".venv" / "bin" / "python")
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = {cpus[0]} if args.pin and len(cpus) >= 2 else None
    client_cpus = {cpus[1]} if server_cpus else None
    servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    out: dict[str, dict[str, float]] = {}
    try:
        for name, src, extra in (("A", args.a, args.a_env), ("B", args.b, args.b_env)):
            port = free_port()
            db = scratch / f"{name}-{time.monotonic_ns()}.db"
            env = {
                **os.environ,
                "PYTHONPATH": str(Path(src).resolve()),
                "TOOLWIRE_LOG_LEVEL": "warning",
                **dict(pair.split("=", 1) for pair in extra),
            }
            env.pop("PROMETHEUS_MULTIPROC_DIR", None)
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
                    *args.serve_arg,
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=(lambda: os.sched_setaffinity(0, server_cpus)) if server_cpus else None,
            )
            servers[name] = (port, proc)
        for port, proc in servers.values():
            wait_up(port, proc)
        time.sleep(1.0)
        for name, (_, proc) in servers.items():
            out[name] = {"start": rss_mb(proc.pid)}
        for spec in warm_specs(args.warm):
            targets = {
                name: f"http://127.0.0.1:{port}{spec['path']}"
                for name, (port, _) in servers.items()
            }
            result = loadgen.sequential(
                {**spec, "targets": targets, "warmup": 0, "block": spec["requests"]}
            )
            for name, res in result.items():
                if res["errors"] or res["bad"]:
                    raise SystemExit(f"{name} {spec['path']}: {res['why']}")
        time.sleep(1.0)
        for name, (_, proc) in servers.items():
            out[name]["idle"] = rss_mb(proc.pid)
            out[name]["peak"] = out[name]["idle"]
        for i, level in enumerate(args.levels):
            for name in ["A", "B"] if i % 2 == 0 else ["B", "A"]:
                port, proc = servers[name]
                with Peak(proc.pid) as peak:
                    wrk(
                        f"http://127.0.0.1:{port}/v1/chat/completions",
                        level,
                        args.seconds,
                        scratch,
                        client_cpus,
                    )
                out[name][f"c{level}"] = peak.peak
                out[name]["peak"] = max(out[name]["peak"], peak.peak)
                time.sleep(0.5)
        for name, (_, proc) in servers.items():
            out[name]["anon"] = rss_mb(proc.pid, "RssAnon")
            out[name]["file"] = rss_mb(proc.pid, "RssFile")
            out[name]["threads"] = float(status_kb(proc.pid, "Threads"))
    finally:
        for _, proc in servers.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for _, proc in servers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="src/ directory of variant A")
    parser.add_argument("--b", required=True, help="src/ directory of variant B")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--warm", type=int, default=50, help="requests of each door first (0: none)"
    )
    parser.add_argument("--levels", default="1,16,64")
    parser.add_argument("--seconds", type=float, default=5.0, help="per throughput point")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="servers on the first CPU, wrk and the mock on the second",
    )
    parser.add_argument("--a-env", action="append", default=[], help="KEY=VALUE for A only")
    parser.add_argument("--b-env", action="append", default=[], help="KEY=VALUE for B only")
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="extra `serve` argument, both"
    )
    args = parser.parse_args()
    args.levels = [int(c) for c in args.levels.split(",") if c.strip()]
    load_before = loadavg()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[1]})  # this process and the mock (its child)
    scratch = Path(tempfile.mkdtemp(prefix="rss-"))
    python = str(HERE.parent / ".venv" / "bin" / "python")
    mock_port = free_port()
    mock = subprocess.Popen(
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
    rounds = []
    try:
        wait_up(mock_port, mock)
        for _ in range(args.rounds):
            rounds.append(one_round(args, mock_port, scratch))
    finally:
        mock.send_signal(signal.SIGTERM)
        mock.wait(10)
    print(
        f"load average before {load_before}, after {loadavg()}; warm {args.warm} per door, "
        f"levels {args.levels} x {args.seconds:g} s, {args.rounds} round(s); MB"
    )
    keys = ["start", "idle", *[f"c{c}" for c in args.levels], "peak", "anon", "file", "threads"]
    for key in keys:
        a = [r["A"][key] for r in rounds]
        b = [r["B"][key] for r in rounds]
        print(
            f"  {key:8s} A {statistics.median(a):7.1f}  B {statistics.median(b):7.1f}"
            f"  B-A median {statistics.median(y - x for x, y in zip(a, b, strict=True)):+6.1f}"
            f"  (per round: {' '.join(f'{y - x:+.1f}' for x, y in zip(a, b, strict=True))})"
        )


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
