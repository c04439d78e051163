"""py-spy on the running toolwire gateway under the benchmark's load -> PROFILE.md.

Called by `run.py --profile` once the measured workloads are done (toolwire is still up, warm):
three recordings: while `wrk` (or the asyncio load generator) drives non-streaming chat
completions at concurrency 64 (the throughput target's level), while 500-chunk streams are sent back to back, and while
non-streaming `/v1/responses` requests are sent back to back. Each is read
from py-spy's collapsed stacks and summarised: self time by package, top functions by self time,
toolwire's functions by inclusive time. Sampling pauses the process (py-spy's blocking mode; the
non-blocking mode loses about half the stacks), so absolute throughput drops while recording;
the shares are what matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def py_spy() -> str:
    exe = Path(sys.executable).parent / "py-spy"
    return str(exe) if exe.exists() else "py-spy"


def record(
    pid: int, seconds: float, out: Path, cpus: set[int] | None, load: Any
) -> tuple[list[tuple[list[str], int]], str]:
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--rate",
            "200",
            "--duration",
            str(int(seconds)),
            "--format",
            "raw",
            "-o",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=preexec,
    )
    time.sleep(0.5)
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    log, _ = proc.communicate(timeout=seconds + 60)
    worker.join(seconds + 60)
    stacks: list[tuple[list[str], int]] = []
    if out.exists():
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks.append((stack.split(";"), int(count)))
    return stacks, log.strip().splitlines()[-2] if log.strip() else ""


def function(frame: str) -> str:
    """`name (path/file.py:123)` -> `name (path/file.py)`."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0]})" if where else name


def package(frame: str) -> str:
    _, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    if path.startswith("<"):
        return "python (frozen)"
    head = path.split("/", 1)[0] if "/" in path else "stdlib: " + path.removesuffix(".py")
    return {
        "asyncio": "asyncio (stdlib)",
        "concurrent": "stdlib: concurrent",
        "json": "stdlib: json",
        "logging": "stdlib: logging",
        "email": "stdlib: email",
        "urllib": "stdlib: urllib",
    }.get(head, head)


def idle(frames: list[str]) -> bool:
    """A worker thread waiting on its queue: the store's writer and reader threads (a thread
    pool's `_worker` in `queue.get`) and the request log's writer (`queue.get` ->
    `Condition.wait`). py-spy does not see them as idle, but they are; a query being run or a
    line being written would show other frames."""
    leaf = frames[-1]
    if leaf.startswith("_worker (concurrent/futures/thread.py"):
        return True  # the store's writer (`store/writer.py`) or readers waiting for a job
    return leaf.startswith("Condition.wait (threading.py") and any(
        f.startswith("_LineWriter._drain (toolwire/observe/requests.py") for f in frames
    )


def summarise(stacks: list[tuple[list[str], int]]) -> dict[str, Any]:
    dropped = sum(n for frames, n in stacks if idle(frames))
    stacks = [(frames, n) for frames, n in stacks if not idle(frames)]
    total = sum(n for _, n in stacks) or 1
    self_fn: Counter[str] = Counter()
    self_pkg: Counter[str] = Counter()
    incl_tw: Counter[str] = Counter()
    incl_all: Counter[str] = Counter()
    for frames, n in stacks:
        leaf = frames[-1]
        self_fn[function(leaf)] += n
        self_pkg[package(leaf)] += n
        seen = set()
        for frame in frames:
            fn = function(frame)
            if fn in seen:
                continue
            seen.add(fn)
            incl_all[fn] += n
            if (
                "toolwire/" in frame
                and "toolwire/cli.py" not in frame
                and "toolwire/__main__" not in frame
            ):
                incl_tw[fn] += n
    pct = lambda c: [(k, 100 * v / total) for k, v in c.most_common()]  # noqa: E731
    return {
        "samples": total,
        "idle_dropped": dropped,
        "self_packages": pct(self_pkg),
        "self_functions": pct(self_fn)[:30],
        "toolwire_inclusive": pct(incl_tw)[:30],
        "inclusive": pct(incl_all)[:60],
    }


def profile(
    *,
    pid: int,
    chat_url: str,
    body_a: bytes,
    body_b: bytes,
    seconds: float,
    wrk: str | None,
    client_cpus: set[int] | None,
    scratch: Path,
    out_dir: Path,
    responses_url: str | None = None,
    body_d: bytes | None = None,
    log: Callable[[str], None] = print,
    throughput: Callable[..., Any],
) -> dict[str, Any]:
    """`log` and `throughput` come from `run.py`, which calls this: handed in, not imported
    back (no import circle between the two scripts)."""
    sys.path.insert(0, str(HERE))
    import loadgen

    log(f"profile: py-spy on toolwire (pid {pid}), non-streaming at concurrency 64, {seconds:g} s")
    result: dict[str, Any] = {}

    def load_a() -> None:
        throughput(chat_url, body_a, 64, seconds - 1, wrk, client_cpus)

    stacks, note = record(pid, seconds, scratch / "profile-a.txt", client_cpus, load_a)
    result["non-streaming, concurrency 64"] = {**summarise(stacks), "py_spy": note}

    log(f"profile: py-spy on toolwire, 500-chunk streams back to back, {seconds:g} s")

    def load_b() -> None:
        client = loadgen.RawClient(chat_url)
        request = client.request_bytes(body_b)
        deadline = time.monotonic() + seconds - 1
        while time.monotonic() < deadline:
            client.post(request)
        client.close()

    stacks, note = record(pid, seconds, scratch / "profile-b.txt", client_cpus, load_b)
    result["streaming, 500 chunks"] = {**summarise(stacks), "py_spy": note}

    if responses_url and body_d:
        log(f"profile: py-spy on toolwire, /v1/responses non-streaming back to back, {seconds:g} s")

        def load_d() -> None:
            client = loadgen.RawClient(responses_url)
            request = client.request_bytes(body_d)
            deadline = time.monotonic() + seconds - 1
            while time.monotonic() < deadline:
                client.post(request)
            client.close()

        stacks, note = record(pid, seconds, scratch / "profile-d.txt", client_cpus, load_d)
        result["/v1/responses non-streaming, sequential"] = {**summarise(stacks), "py_spy": note}
    (scratch / "profile.json").write_text(json.dumps(result, indent=1))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "PROFILE.md"
    path.write_text(render(result))
    log(f"wrote {path}")
    return {"file": path.name}


def render(result: dict[str, Any]) -> str:
    out = [
        "# toolwire under load: py-spy profile\n",
        "Generated by `python benchmarks/run.py --profile` (see `profile_toolwire.py`). Percentages are of all samples "
        "of the toolwire process while it was busy (py-spy leaves idle threads out). *Self* is time in the function's own "
        "code; *inclusive* counts its callees too.\n",
    ]
    for scenario, s in result.items():
        out.append(f"## {scenario}\n")
        out.append(
            f"{s['samples']} busy samples ({s['idle_dropped']} samples of idle worker threads left out: the store's writer and readers, the request log's); {s['py_spy']}\n"
        )
        out.append("**Self time by package**\n")
        out.append("| package | % |\n|---|---:|")
        out += [f"| {k} | {v:.1f} |" for k, v in s["self_packages"][:15]]
        out.append("\n**toolwire's functions, inclusive**\n")
        out.append("| function | % |\n|---|---:|")
        out += [f"| `{k}` | {v:.1f} |" for k, v in s["toolwire_inclusive"][:25]]
        out.append("\n**Top functions by self time**\n")
        out.append("| function | % |\n|---|---:|")
        out += [f"| `{k}` | {v:.1f} |" for k, v in s["self_functions"][:25]]
        out.append("\n**Top functions, inclusive (all packages)**\n")
        out.append("| function | % |\n|---|---:|")
        out += [f"| `{k}` | {v:.1f} |" for k, v in s["inclusive"][:40]]
        out.append("")
    return "\n".join(out) + "\n"
