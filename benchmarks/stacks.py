"""Which stack: the bare forward (no logic) on every candidate server and client, side by side in
one run, with SMG's Rust router (`sglang-router`) and toolwire itself against the same mock.

    .venv/bin/python benchmarks/stacks.py            # ~6 minutes; writes benchmarks/FLOORS.md
    .venv/bin/python benchmarks/stacks.py --quick    # ~2 minutes
    options: --servers uvicorn,granian-asgi --modes bare,aiohttp --duration S --requests N
             --streams N --no-router --no-toolwire --no-codecs --results FILE

Paths (every gateway and floor pinned to one CPU, the load generator and the mock to another):

- **direct**: the mock itself (`mock_upstream.py`);
- **floors** (`floors.py`): each server (`uvicorn` + httptools on uvloop, as toolwire serves;
  `uvicorn-asyncio`; `granian-asgi`; `granian-rsgi`) with each client mode (`bare`: no
  upstream; `aiohttp`; `pyreqwest`; `pyqwest`);
- **sglang-router**: SMG's router (Rust, `sglang-router` on PyPI, in `benchmarks/.venv-router`),
  `--worker-urls` the mock, round robin, health checks off: the floor of the best a gateway
  written in Rust forwards at;
- **toolwire**: `toolwire serve` from this checkout's `src/`, as run.py runs it.

Workloads: (a) sequential non-streaming chat completions with a tool call (blocks rotating over
the paths, one keep-alive connection each); (b) the 500-chunk streamed call, relayed event by
event (model `mock-stream-relay`: a floor sends one server write per upstream SSE event; the
router relays as it reads; toolwire's chat door holds the call until the turn ends); per chunk =
((b) added p50 − (a) added p50) / 500, as run.py computes the chat door's; (c) throughput at
concurrency 64 for `--duration` seconds with wrk (or the Python generator), CPU per request from
/proc (the process and its children, all threads), peak RSS sampled every 100 ms.
`json_codecs.py` (msgspec vs orjson + pydantic on the hot-path shapes) runs last, in process.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402
from mock_upstream import SHORT_ARGS, long_arguments  # noqa: E402

SERVERS = ("uvicorn", "uvicorn-asyncio", "granian-asgi", "granian-rsgi")
MODES = ("bare", "aiohttp", "pyreqwest", "pyqwest")
BASE_FLOOR = "floor-uvicorn-aiohttp"  # the floor the targets of issue #38 are ratios to
TICK = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (granian's and the router's helpers would count)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
    return out


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def rss_bytes(pid: int) -> int:
    total = 0
    for p in tree(pid):
        with contextlib.suppress(OSError), open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


class PeakRss:
    """Peak RSS of one process tree while `watching` is set."""

    def __init__(self) -> None:
        self.pid = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, pid: int) -> None:
        self.pid, self.peak = pid, 0

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            if self.pid:
                self.peak = max(self.peak, rss_bytes(self.pid))

    def stop(self) -> None:
        self._stop.set()


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default=",".join(SERVERS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--duration", type=float, default=None, help="seconds per c=64 point")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=None, help="(a) requests per path")
    parser.add_argument("--streams", type=int, default=None, help="(b) streams per path")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-router", action="store_true")
    parser.add_argument("--no-toolwire", action="store_true")
    parser.add_argument("--no-codecs", action="store_true")
    parser.add_argument("--no-wrk", action="store_true")
    parser.add_argument("--results", default=str(HERE / "FLOORS.md"))
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    args.duration = args.duration or (3.0 if args.quick else 10.0)
    args.requests = args.requests or (200 if args.quick else 1000)
    args.streams = args.streams or (20 if args.quick else 100)
    return args


def main() -> None:
    args = parse_args()
    run.SCRATCH.mkdir(exist_ok=True)
    why = run.ensure_extra_site() or run.ensure_stack_site()
    if why:
        sys.exit(f"stacks.py needs the candidate packages: {why}")
    router_exe, router_why = (
        (None, "skipped (--no-router)") if args.no_router else run.ensure_router()
    )
    if router_exe is None:
        run.log(f"sglang-router left out: {router_why}")
    wrk = run.find_wrk(allow_install=not args.no_wrk) if not args.no_wrk else None
    cpus = sorted(os.sched_getaffinity(0))
    gw_cpus, client_cpus = ({cpus[0]}, {cpus[1]}) if len(cpus) >= 2 else (None, None)
    load_before = loadavg()
    started = dt.datetime.now(dt.UTC)

    procs = run.Processes()
    peak = PeakRss()
    paths: dict[str, tuple[str, int | None]] = {}  # name -> (base URL, pid)
    try:
        mock_port = run.free_port()
        mock = procs.start(
            "stacks-mock",
            [
                str(run.PROJECT_PY),
                str(HERE / "mock_upstream.py"),
                "--port",
                str(mock_port),
                "--chunks",
                str(run.STREAM_CHUNKS),
            ],
            cpus=client_cpus,
        )
        mock_v1 = f"http://127.0.0.1:{mock_port}/v1"
        run.wait_http(f"{mock_v1}/health", mock, "stacks-mock")
        paths["direct"] = (mock_v1, None)
        if not args.no_toolwire:
            port = run.free_port()
            proc = run.start_toolwire(
                procs, "stacks-toolwire", [str(run.PROJECT_PY), "-m", "toolwire"], mock_v1, port,
                gw_cpus,
            )  # fmt: skip
            paths["toolwire"] = (f"http://127.0.0.1:{port}/v1", proc.pid)
        if router_exe is not None:
            port = run.free_port()
            proc = procs.start(
                "stacks-router",
                run.router_argv(router_exe, port, mock_v1),
                cpus=gw_cpus,
            )
            run.wait_http(f"http://127.0.0.1:{port}/health", proc, "stacks-router")
            paths["sglang-router"] = (f"http://127.0.0.1:{port}/v1", proc.pid)
        for server in args.servers.split(","):
            for mode in args.modes.split(","):
                name = f"floor-{server}-{mode}"
                port = run.free_port()
                proc = procs.start(
                    name,
                    [
                        str(run.PROJECT_PY),
                        str(HERE / "floors.py"),
                        "--server",
                        server,
                        "--mode",
                        mode,
                        "--upstream",
                        mock_v1,
                        "--port",
                        str(port),
                        "--chunks",
                        str(run.STREAM_CHUNKS),
                    ],
                    cpus=gw_cpus,
                )
                run.wait_http(f"http://127.0.0.1:{port}/health", proc, name)
                paths[name] = (f"http://127.0.0.1:{port}/v1", proc.pid)
        run.log(f"up: {', '.join(paths)}")
        time.sleep(1.0)
        idle_rss = {n: rss_bytes(pid) for n, (_, pid) in paths.items() if pid}
        chat = {n: f"{base}/chat/completions" for n, (base, _) in paths.items()}
        long_args = long_arguments(run.STREAM_CHUNKS - 4)[0]
        body = {"model": "mock-tool", "messages": run.MESSAGES, "tools": run.TOOLS}
        a = run.sequential(
            "stacks-a", chat, body, stream=False, kind="chat", expected=SHORT_ARGS,
            warmup=min(100, args.requests // 5), requests=args.requests, models={},
            cpus=client_cpus, block=25,
        )  # fmt: skip
        b = run.sequential(
            "stacks-b", chat, {**body, "model": "mock-stream-relay", "stream": True},
            stream=True, kind="chat", expected=long_args, warmup=max(3, args.streams // 10),
            requests=args.streams, models={}, cpus=client_cpus, block=5,
        )  # fmt: skip
        c: dict[str, Any] = {}
        raw = json.dumps(body).encode()
        for name, (_, pid) in paths.items():
            run.log(f"c: concurrency {args.concurrency}, {name}, {args.duration:g} s")
            if pid:
                peak.watch(pid)
                cpu0 = cpu_seconds(pid)
            res = run.throughput(chat[name], raw, args.concurrency, args.duration, wrk, client_cpus)
            if pid:
                res["cpu_us_per_request"] = (
                    (cpu_seconds(pid) - cpu0) / max(res["requests"], 1) * 1e6
                )
                res["peak_rss"] = peak.peak
                peak.watch(0)
            c[name] = res
            run.log(f"   {res['rps']:.0f} req/s, {res['errors']} errors")
            time.sleep(0.5)
    finally:
        peak.stop()
        procs.stop_all()

    codecs_table = ""
    if not args.no_codecs:
        done = subprocess.run(
            [str(run.PROJECT_PY), str(HERE / "json_codecs.py"), "--markdown"],
            capture_output=True,
            text=True,
            timeout=900,
            preexec_fn=(lambda: os.sched_setaffinity(0, gw_cpus)) if gw_cpus else None,
        )
        codecs_table = (
            done.stdout if done.returncode == 0 else f"json_codecs.py failed: {done.stderr[-500:]}"
        )
    results = {
        "a": a, "b": b, "c": c, "idle_rss": idle_rss, "load_before": load_before,
        "load_after": loadavg(), "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "args": vars(args), "wrk": bool(wrk),
        "router": router_why or run.ROUTER_VERSION,
        "pinning": None if gw_cpus is None else [sorted(gw_cpus), sorted(client_cpus or [])],
    }  # fmt: skip
    (run.SCRATCH / "stacks.json").write_text(json.dumps(results, indent=1))
    text = report(results, codecs_table)
    Path(args.results).write_text(text)
    print(text)


def p50_ms(res: dict[str, Any]) -> float:
    return statistics.median(res["total_us"]) / 1000 if res.get("total_us") else float("nan")


def label(name: str) -> tuple[str, str]:
    """(server, client) of a path."""
    if name.startswith("floor-"):
        rest = name.removeprefix("floor-")
        server, _, mode = rest.rpartition("-")
        return server, ("none" if mode == "bare" else mode)
    return {
        "direct": ("mock", "–"),
        "toolwire": ("uvicorn + uvloop, Starlette", "aiohttp"),
        "sglang-router": ("SMG router (Rust)", "reqwest (Rust)"),
    }[name]


def report(r: dict[str, Any], codecs_table: str) -> str:
    a, b, c = r["a"], r["b"], r["c"]
    direct_a, direct_b = p50_ms(a["direct"]), p50_ms(b["direct"])
    chunks = run.STREAM_CHUNKS

    def added(res: dict[str, Any], base: float) -> float:
        return p50_ms(res) - base

    base_a = added(a[BASE_FLOOR], direct_a) if BASE_FLOOR in a else float("nan")
    base_cpu = c.get(BASE_FLOOR, {}).get("cpu_us_per_request", float("nan"))
    lines = [
        "# Floors of every candidate stack, side by side",
        "",
        f"Generated by `python benchmarks/stacks.py` (see its docstring) on {r['started']}. "
        "Do not edit by hand. Load average (1, 5, 15 min) before the run: "
        f"{r['load_before']}; after: {r['load_after']} (a 2-core machine shared with other "
        "work: read the ratios, measured in this one run, not the absolute figures).",
        "",
        f"Pinning: gateways on CPU {r['pinning'][0]}, load generator and mock on {r['pinning'][1]}."
        if r["pinning"]
        else "Not pinned (fewer than two CPUs).",
        f"Throughput with {'wrk' if r['wrk'] else 'the Python load generator'}, "
        f"concurrency {r['args']['concurrency']}, {r['args']['duration']:g} s per path. "
        f"(a) {r['args']['requests']} requests per path, (b) {r['args']['streams']} streams per "
        f"path of {chunks} chunks; sglang-router: {r['router']}.",
        "",
        f"*× floor*: the figure over the uvicorn + uvloop + aiohttp floor's ({BASE_FLOOR}), as "
        "issue #38's targets are read. *per chunk* = ((b) added p50 − (a) added p50) / "
        f"{chunks}: a floor writes every upstream event to its client as its own write (toolwire's "
        "chat door holds the call, so its figure is the decode and assembly, not the writes).",
        "",
        "| path | server | client | (a) p50 ms | added p50 ms | × floor | per chunk µs | "
        "req/s c=64 | CPU µs/req | × floor CPU | peak RSS MB | checked |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in a:
        server, client = label(name)
        ra, rb, rc = a[name], b.get(name, {}), c.get(name, {})
        add_a = added(ra, direct_a) if name != "direct" else float("nan")
        add_b = added(rb, direct_b) if rb and name != "direct" else float("nan")
        per_chunk = (add_b - add_a) * 1000 / chunks
        cpu = rc.get("cpu_us_per_request", float("nan"))
        bad = [
            f"{k}: {res['why']}"
            for k, res in (("a", ra), ("b", rb))
            if res and (res["errors"] or res["bad"])
        ]
        if rc.get("errors"):
            bad.append(f"c: {rc['errors']} errors")
        lines.append(
            f"| {name} | {server} | {client} | {p50_ms(ra):.3f} | "
            + ("–" if name == "direct" else f"{add_a:+.3f}")
            + f" | {add_a / base_a:.2f}× | "
            + ("–" if name == "direct" else f"{per_chunk:.2f}")
            + f" | {rc.get('rps', float('nan')):.0f} | {cpu:.0f} | {cpu / base_cpu:.2f}× | "
            + f"{rc.get('peak_rss', 0) / 1e6:.1f} | "
            + ("; ".join(bad)[:160] if bad else "all correct")
            + " |"
        )
    lines += ["", codecs_table] if codecs_table else []
    return "\n".join(line.replace("nan×", "–").replace("| nan |", "| – |") for line in lines) + "\n"


if __name__ == "__main__":
    main()
