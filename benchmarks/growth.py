"""Cost as work grows: what toolwire adds as a request declares more tools, carries a longer
history, or gets more parallel calls back in one turn; per extra item, and whether it stays flat.

    .venv/bin/python benchmarks/growth.py [--requests 150] [--out benchmarks/GROWTH.md]

One mock upstream (`mock_upstream.py`) and one `toolwire serve` (this checkout's `src/`, SQLite);
for each size, sequential requests go to the mock directly and through toolwire in alternating
blocks on kept-alive connections; *added* is toolwire's p50 minus the direct p50 of the same
body. Series, each on the chat door (`/v1/chat/completions`) and on `/v1/responses` (stored):

- history: 0 to 400 earlier messages (2 tools);
- tools: 2 to 100 declared tools (2 messages);
- parallel calls: 1 to 64 calls of one tool in a single model turn (the mock's
  `mock-parallel-N`);
- the scenario of issue #26: 50 tools and a 200-item history, and a 64-call parallel turn.

The cost per item is the least-squares slope of added p50 over the series; *flat* means the
slope over the series' upper half is at most twice that over its lower half, or over the whole
series where the lower half falls (noise larger than its cost) (a quadratic path would make it
grow with the size).
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
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ab import free_port, wait_up  # noqa: E402
from loadgen import RawClient  # noqa: E402

PYTHON = HERE.parent / ".venv" / "bin" / "python"
HISTORY = [0, 50, 100, 200, 400]
TOOLS = [2, 10, 25, 50, 100]
PARALLEL = [1, 8, 16, 32, 64]


def tool(k: int) -> dict[str, Any]:
    name = "get_weather" if k == 0 else f"tool_{k:03d}"
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Tool number {k}: does one thing well.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    }


def history(n: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if k % 2 == 0 else "assistant",
            "content": f"Message {k} of the conversation so far, about the weather in places.",
        }
        for k in range(n)
    ]


def bodies(door: str, tools: int, past: int, model: str) -> dict[str, Any]:
    declared = [tool(k) for k in range(tools)]
    ask = {"role": "user", "content": "What is the weather in Paris right now?"}
    if door == "chat":
        return {"model": model, "messages": [*history(past), ask], "tools": declared}
    return {
        "model": model,
        "input": [*history(past), ask],
        "tools": [{"type": "function", **t["function"]} for t in declared],
    }


def calls_in(door: str, raw: bytes) -> int:
    body = json.loads(raw)
    if door == "chat":
        return len(body["choices"][0]["message"].get("tool_calls") or [])
    return sum(1 for item in body["output"] if item["type"] == "function_call")


def measure(
    urls: dict[str, str], door: str, body: dict[str, Any], requests: int, expect: int
) -> dict[str, float]:
    """p50 in ms per target, blocks of 25 alternating."""
    path = "/v1/chat/completions" if door == "chat" else "/v1/responses"
    clients = {name: RawClient(url + path) for name, url in urls.items()}
    raw = json.dumps(body).encode()
    prepared = {name: c.request_bytes(raw) for name, c in clients.items()}
    times: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(5):  # warm-up
        for name, client in clients.items():
            client.post(prepared[name])
    order = list(urls)
    block = 25
    for start in range(0, requests, block):
        for name in order:
            for _ in range(min(block, requests - start)):
                status, _, _, total, answer = clients[name].post(prepared[name])
                if status != 200:
                    raise SystemExit(f"{name} {door}: HTTP {status}: {answer[:300]!r}")
                if name == "toolwire" and calls_in(door, answer) != expect:
                    raise SystemExit(f"{door}: expected {expect} calls: {answer[:300]!r}")
                times[name].append(total / 1e6)
        order.reverse()
    for client in clients.values():
        client.close()
    return {name: statistics.median(values) for name, values in times.items()}


def slope(xs: list[int], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def flat(xs: list[int], ys: list[float]) -> tuple[bool, float, float]:
    half = len(xs) // 2
    low = slope(xs[: half + 1], ys[: half + 1])
    high = slope(xs[half:], ys[half:])
    # A lower half that falls (noise larger than its cost) says nothing about growth: the
    # upper half is then held to the whole series' slope instead. A quadratic path never
    # falls in its lower half, so it is still judged against it.
    reference = low if low > 0 else slope(xs, ys)
    return high <= 2 * max(reference, 1e-6) or high <= 0.0005, low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--out", default=str(HERE / "GROWTH.md"))
    parser.add_argument("--json", default=str(HERE / ".scratch" / "growth.json"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="growth-"))
    procs: list[subprocess.Popen[bytes]] = []
    results: dict[str, Any] = {"requests": args.requests, "series": {}}
    try:
        mock = free_port()
        procs.append(
            subprocess.Popen(
                [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(mock)],
                stdout=subprocess.DEVNULL,
            )
        )
        wait_up(mock, procs[-1], timeout=90)
        port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": str(HERE.parent / "src"),
            "TOOLWIRE_LOG_LEVEL": "warning",
        }
        procs.append(
            subprocess.Popen(
                [
                    str(PYTHON),
                    "-m",
                    "toolwire",
                    "serve",
                    "--upstream",
                    f"http://127.0.0.1:{mock}/v1",
                    "--db",
                    f"sqlite:///{tmp}/growth.db",
                    "--port",
                    str(port),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_up(port, procs[-1], timeout=90)
        urls = {"direct": f"http://127.0.0.1:{mock}", "toolwire": f"http://127.0.0.1:{port}"}
        series = {
            "history": (HISTORY, lambda n: (2, n, "mock-tool", 1)),
            "tools": (TOOLS, lambda n: (n, 2, "mock-tool", 1)),
            "parallel": (PARALLEL, lambda n: (2, 2, f"mock-parallel-{n}", n)),
        }
        for door in ("chat", "responses"):
            for name, (sizes, shape) in series.items():
                points = []
                for size in sizes:
                    tools, past, model, expect = shape(size)
                    body = bodies(door, tools, past, model)
                    p50 = measure(urls, door, body, args.requests, expect)
                    added = p50["toolwire"] - p50["direct"]
                    points.append((size, added, p50["toolwire"], p50["direct"]))
                    print(f"{door:9s} {name:8s} {size:4d}: added {added:.3f} ms", flush=True)
                results["series"][f"{door}/{name}"] = points
            for label, tools, past, model, expect in (
                ("50 tools + 200-item history", 50, 200, "mock-tool", 1),
                ("64-call parallel turn", 2, 2, "mock-parallel-64", 64),
                ("baseline: 2 tools, 2 messages", 2, 2, "mock-tool", 1),
            ):
                p50 = measure(urls, door, bodies(door, tools, past, model), args.requests, expect)
                results.setdefault("scenario", {})[f"{door}/{label}"] = (
                    p50["toolwire"] - p50["direct"],
                    p50["toolwire"],
                    p50["direct"],
                )
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
    Path(args.json).parent.mkdir(exist_ok=True)
    Path(args.json).write_text(json.dumps(results))
    text = render(results)
    Path(args.out).write_text(text)
    print(text)


def render(results: dict[str, Any]) -> str:
    units = {"history": "history item", "tools": "declared tool", "parallel": "parallel call"}
    lines = [
        "# Cost as work grows",
        "",
        f"Generated by `python benchmarks/growth.py` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} ({results['requests']} "
        "sequential requests per point and path, alternating blocks; *added* = toolwire p50 − "
        "direct p50 of the same body). Do not edit by hand.",
        "",
        "## The scenario of issue #26",
        "",
        "| door | request | toolwire p50 ms | direct p50 ms | added p50 ms |",
        "|---|---|---:|---:|---:|",
    ]
    for key, (added, tw, direct) in results.get("scenario", {}).items():
        door, label = key.split("/", 1)
        lines.append(f"| {door} | {label} | {tw:.3f} | {direct:.3f} | {added:.3f} |")
    lines += [
        "",
        "## Cost per extra item",
        "",
        "Slope: least squares over the series. *Flat*: the slope over the upper half of the "
        "series is at most twice the lower half's, or the whole series' where the lower half "
        "falls (noise) (a quadratic path would grow with the size).",
        "",
        "| door | series | added p50 ms at each size | cost per extra item | lower / upper half | flat |",
        "|---|---|---|---:|---|---|",
    ]
    for key, points in results["series"].items():
        door, name = key.split("/", 1)
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        ok, low, high = flat(xs, ys)
        sizes = ", ".join(f"{x}: {y:.3f}" for x, y in zip(xs, ys, strict=True))
        lines.append(
            f"| {door} | {name} | {sizes} | {slope(xs, ys) * 1000:.2f} µs per {units[name]} | "
            f"{low * 1000:.2f} / {high * 1000:.2f} µs | {'yes' if ok else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
