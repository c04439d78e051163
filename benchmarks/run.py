"""What a gateway adds: the same workload sent direct, through toolwire, and through LiteLLM.

One command runs everything and regenerates `benchmarks/RESULTS.md` and `benchmarks/plots/*.png`:

    .venv/bin/python benchmarks/run.py            # or plain python3; ~8 minutes
    .venv/bin/python benchmarks/run.py --quick    # a ~2 minute smoke run
    options: --duration S (throughput, per point; default 20), --concurrency 1,16,64,
             --skip-litellm, --no-pin, --no-wrk, --profile (py-spy on toolwire -> PROFILE.md)

Processes (every one stopped at the end, on Ctrl-C and on errors; all on 127.0.0.1):

- the mock upstream (`mock_upstream.py`): pre-encoded answers, raw asyncio + uvloop;
- toolwire (`python -m toolwire serve`, the project's `.venv`), log level warning;
- the LiteLLM proxy (`litellm[proxy]==LITELLM_VERSION` in `benchmarks/.venv-litellm`, created here),
  one worker, no database, telemetry off, log level warning;
- the load generator (`loadgen.py`, and `wrk` for throughput when it is installed or installable).

With two or more CPUs the gateways share one CPU and the mock and the load generator another
(`--no-pin` turns that off), so a gateway's figures are per core and it never competes with the
client for CPU. Extra tools live in `benchmarks/.venv-bench` (matplotlib, psutil, uvloop, py-spy),
created on first use; this script re-executes itself there.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCRATCH = HERE / ".scratch"
BENCH_VENV = HERE / ".venv-bench"
LITELLM_VENV = HERE / ".venv-litellm"
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
EXTRA_SITE = HERE / ".pip-extras"
EXTRA_REQUIREMENTS = ["aiohttp==3.14.5", "httpx-aiohttp==0.2.0"]
# The candidate stack of issue #38 (stacks.py, floors.py): granian and two Rust HTTP clients, and
# msgspec for json_codecs.py, in benchmarks/.stack-extras (pip --target with the project's
# interpreter; appended to sys.path, so the venv's own packages win).
STACK_SITE = HERE / ".stack-extras"
STACK_REQUIREMENTS = ["granian==2.8.7", "pyreqwest==0.15.1", "pyqwest==0.12.0", "msgspec==0.22.0"]
# SMG's Rust router (the `sglang-router` wheel: a Rust binary behind a Python launcher), in its
# own venv: the floor of the best, in front of the same mock.
ROUTER_VERSION = "0.3.2"
ROUTER_VENV = HERE / ".venv-router"
# Variants of "toolwire + proposed fixes" (toolwire_patched.py), measured side by side. Every
# patch proposed so far has landed in src/ (the aiohttp upstream client among them), so none by
# default: `--patches drain,uvloop` still measures a patch set when a new one is proposed.
DEFAULT_PATCHES = ""
VARIANT_NAMES = ("patched", "patched-b")
# The second peer: Portkey's open-source gateway (Node), pinned, installed with npm into
# benchmarks/.portkey (git-ignored), run as `node build/start-server.js --port=P --headless`.
PORTKEY_VERSION = "1.15.2"
PORTKEY_DIR = HERE / ".portkey"
# Portkey answers fail ("TypeError: immutable" in updateHeaders) with @hono/node-server newer
# than 1.14.2, which its `^1.3.3` range lets npm pick (Portkey-AI/gateway issue #1389). Its
# streams still fail on Node 20 with 1.14.2 (issue #1550; the fix, PR #1551, is not in 1.15.2,
# the newest this machine's registry has): Portkey's streaming figures come out as failures.
PORTKEY_OVERRIDES = {"@hono/node-server": "1.14.2"}
# toolwire with `--workers 2` (throughput only): how far a second core takes it
WORKERS = 2

# The newest litellm[proxy] whose dependencies resolve on this machine's package index (1.103.8 to
# 1.109.1 need certifi>=2026.10.19, which it does not carry).
LITELLM_VERSION = "1.103.7"
BENCH_REQUIREMENTS = ["matplotlib==3.11.2", "psutil==7.2.2", "uvloop==0.23.0", "py-spy==0.4.3"]

STREAM_CHUNKS = 500
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file in the workspace.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]
MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant. Use the tools when they help. " * 8,
    },
    {"role": "user", "content": "What is the weather in Paris right now?"},
]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]
ANTHROPIC_TOOLS = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]

GEMINI_TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "parametersJsonSchema": t["function"]["parameters"],
            }
            for t in TOOLS
        ]
    }
]


# -- bootstrap --------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_bench_env() -> None:
    """Re-execute in benchmarks/.venv-bench unless this interpreter already has what we need."""
    try:
        import matplotlib  # noqa: F401
        import psutil  # noqa: F401

        return
    except ImportError:
        pass
    py = venv_python(BENCH_VENV)
    if Path(sys.prefix).resolve() == BENCH_VENV.resolve():
        sys.exit("benchmarks/.venv-bench is incomplete: delete it and run again")
    if not py.exists():
        log(f"creating {BENCH_VENV.relative_to(ROOT)} ({', '.join(BENCH_REQUIREMENTS)})")
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    probe = subprocess.run([str(py), "-c", "import matplotlib, psutil"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", *BENCH_REQUIREMENTS],
            check=True,
            timeout=900,
        )
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


def ensure_project_env() -> None:
    if (
        PROJECT_PY.exists()
        and subprocess.run(
            [str(PROJECT_PY), "-c", "import toolwire"], capture_output=True
        ).returncode
        == 0
    ):
        return
    log(
        "the project venv is missing: creating it as `make test` would (.venv, pip install -e .[dev])"
    )
    if shutil.which("make"):
        subprocess.run(["make", "-C", str(ROOT), ".venv/.installed"], check=True, timeout=1800)
    else:
        subprocess.run([sys.executable, "-m", "venv", str(ROOT / ".venv")], check=True)
        subprocess.run(
            [str(PROJECT_PY), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"],
            check=True,
            timeout=1800,
        )


def ensure_litellm(version: str) -> tuple[Path | None, str]:
    """The pinned LiteLLM proxy in its own venv: (litellm executable or None, why not)."""
    return ensure_pinned(LITELLM_VENV, "litellm", version, "litellm", extras="[proxy]")


def ensure_pinned(
    venv: Path, package: str, version: str, command: str, *, extras: str = ""
) -> tuple[Path | None, str]:
    """`package[extras]==version` in a venv of its own (created, or brought to that version):
    (the path of its `command`, or None and why not). A peer never shares toolwire's venv."""
    py = venv_python(venv)
    exe = venv / "bin" / command
    have = (
        subprocess.run(
            [str(py), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
            capture_output=True,
            text=True,
        )
        if py.exists()
        else None
    )
    if (
        have is not None
        and have.returncode == 0
        and have.stdout.strip() == version
        and exe.exists()
    ):
        return exe, ""
    pinned = f"{package}{extras}=={version}"
    try:
        if not py.exists():
            log(f"creating {venv.relative_to(ROOT)} with {pinned}")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        else:
            log(f"installing {pinned} into {venv.relative_to(ROOT)}")
        done = subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", pinned],
            capture_output=True,
            text=True,
            timeout=1200,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not install {pinned}: {exc}"
    if done.returncode != 0 or not exe.exists():
        tail = [
            re.sub(r" \(from versions: [^)]*\)", "", line)
            for line in done.stderr.splitlines()
            if not line.startswith("WARNING: Location")
        ][-3:]
        return None, f"pip install {pinned} failed: {' / '.join(tail)}"
    return exe, ""


def ensure_extra_site() -> str:
    """aiohttp + httpx-aiohttp in benchmarks/.pip-extras for the floors and the `aiohttp` patch
    (a `pip install --target` with the project's interpreter; its venv is left untouched).
    Returns why not, or ''."""
    marker = EXTRA_SITE / ".complete"
    have = subprocess.run(
        [str(PROJECT_PY), "-c", "import aiohttp, httpx_aiohttp"], capture_output=True
    )
    if marker.exists() or have.returncode == 0:
        return ""
    why = pip_target(EXTRA_SITE, EXTRA_REQUIREMENTS)
    if not why:
        marker.touch()
    return why


def pip_target(site: Path, requirements: list[str], *extra: str) -> str:
    """`pip install --target site requirements` with the project's interpreter: why not, or ''."""
    log(f"installing {', '.join(requirements)} into {site.relative_to(ROOT)}")
    try:
        done = subprocess.run(
            [
                str(PROJECT_PY),
                "-m",
                "pip",
                "install",
                "--quiet",
                *extra,
                "--target",
                str(site),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return f"could not install {requirements}: {exc}"
    if done.returncode != 0:
        return f"pip install --target failed: {done.stderr.strip().splitlines()[-1:]}"
    return ""


def ensure_stack_site() -> str:
    """STACK_REQUIREMENTS in benchmarks/.stack-extras. Returns why not, or ''."""
    marker = STACK_SITE / ".complete"
    if marker.exists() and marker.read_text() == " ".join(STACK_REQUIREMENTS):
        return ""
    why = pip_target(STACK_SITE, STACK_REQUIREMENTS, "--upgrade")
    if not why:
        marker.write_text(" ".join(STACK_REQUIREMENTS))
    return why


def router_argv(python: Path, port: int, worker: str) -> list[str]:
    """SMG's router in front of one worker (the mock), round robin, its health checks off (the
    mock is up before it starts), on 127.0.0.1:`port`; its Prometheus exporter on a free
    loopback port (its default, 0.0.0.0:29000, is taken by any other router on the machine)."""
    return [
        str(python),
        "-m",
        "sglang_router.launch_router",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--worker-urls",
        worker.removesuffix("/v1"),
        "--policy",
        "round_robin",
        "--log-level",
        "warn",
        "--disable-health-check",
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(free_port()),
    ]


def ensure_router(version: str = ROUTER_VERSION) -> tuple[Path | None, str]:
    """`sglang-router==version` in benchmarks/.venv-router: (its python or None, why not)."""
    py = venv_python(ROUTER_VENV)
    probe = (
        subprocess.run(
            [str(py), "-c", "import importlib.metadata as m; print(m.version('sglang-router'))"],
            capture_output=True,
            text=True,
        )
        if py.exists()
        else None
    )
    if probe is not None and probe.returncode == 0 and probe.stdout.strip() == version:
        return py, ""
    try:
        if not py.exists():
            log(f"creating {ROUTER_VENV.relative_to(ROOT)} with sglang-router=={version}")
            subprocess.run([sys.executable, "-m", "venv", str(ROUTER_VENV)], check=True)
        done = subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", f"sglang-router=={version}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not install sglang-router=={version}: {exc}"
    if done.returncode != 0:
        return None, f"pip install sglang-router=={version} failed: {done.stderr[-300:]}"
    return py, ""


def ensure_portkey(version: str) -> tuple[Path | None, str]:
    """The pinned Portkey gateway in benchmarks/.portkey: (its start-server.js or None, why not)."""
    script = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    meta = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway" / "package.json"
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None:
        return None, "node is not installed"
    package = PORTKEY_DIR / "package.json"
    wanted = {
        "name": "toolwire-bench-portkey",
        "private": True,
        "dependencies": {"@portkey-ai/gateway": version},
        "overrides": PORTKEY_OVERRIDES,
    }
    if (
        script.exists()
        and meta.exists()
        and json.loads(meta.read_text())["version"] == version
        and json.loads(package.read_text()) == wanted
    ):
        return script, ""
    if npm is None:
        return None, "npm is not installed"
    PORTKEY_DIR.mkdir(exist_ok=True)
    package.write_text(json.dumps(wanted, indent=1) + "\n")
    log(f"installing @portkey-ai/gateway@{version} into {PORTKEY_DIR.relative_to(ROOT)}")
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"],
            cwd=PORTKEY_DIR,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"npm install failed: {exc}"
    if done.returncode != 0 or not script.exists():
        return None, f"npm install failed: {done.stderr.strip().splitlines()[-1:]}"
    return script, ""


def find_wrk(allow_install: bool) -> str | None:
    found = shutil.which("wrk")
    if found or not allow_install:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        log("wrk not found: trying apt-get install -y wrk (use --no-wrk to skip)")
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["apt-get", "install", "-y", "-q", "wrk"],
                capture_output=True,
                timeout=240,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
    found = shutil.which("wrk")
    if not found:
        log("wrk unavailable: throughput uses the Python asyncio load generator")
    return found


# -- processes --------------------------------------------------------------------------------


class Processes:
    """Everything we start; each in its own session so its children die with it."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cpus: set[int] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        logfile = open(SCRATCH / f"{name}.log", "wb")  # noqa: SIM115
        preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        proc = subprocess.Popen(
            argv,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
        )
        logfile.close()
        self.procs.append((name, proc))
        return proc

    def stop(self, proc: subprocess.Popen[bytes], grace: float = 8.0) -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        else:  # the leader is gone; make sure nothing it spawned outlives it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                self.stop(proc)
        self.procs.clear()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen[bytes], name: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{name} exited with {proc.returncode}; see {SCRATCH / (name + '.log')}"
            )
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s")


class MockStats:
    """What each path sent to the mock: `GET /stats` before and after a workload."""

    def __init__(self, url: str, ports: dict[str, int]) -> None:
        self.url = url
        self.ports = ports

    def snapshot(self) -> dict[str, dict[str, int]]:
        with urllib.request.urlopen(self.url, timeout=5) as response:
            raw = json.loads(response.read())
        return {name: raw.get(str(port), {}) for name, port in self.ports.items()}

    @staticmethod
    def delta(
        before: dict[str, dict[str, int]], after: dict[str, dict[str, int]], calls: dict[str, int]
    ) -> dict[str, Any]:
        """Per path: upstream requests by kind and new connections, per client request."""
        out: dict[str, Any] = {}
        for name, now in after.items():
            if name not in calls or not calls[name]:
                continue
            d = {k: now.get(k, 0) - before.get(name, {}).get(k, 0) for k in now}
            n = calls[name]
            out[name] = {
                "client_requests": n,
                "connections_per_request": d.get("connections", 0) / n,
                "upstream_per_request": {
                    k: v / n for k, v in d.items() if k != "connections" and v
                },
            }
        return out


class RssSampler:
    """Samples RSS (process + children) and CPU time of each watched process every 100 ms."""

    def __init__(self, interval: float = 0.1) -> None:
        import psutil

        self.psutil = psutil
        self.interval = interval
        self.watch: dict[str, psutil.Process] = {}
        self.peak: dict[str, int] = {}
        self.active: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def add(self, name: str, pid: int) -> None:
        self.watch[name] = self.psutil.Process(pid)

    def tree(self, name: str) -> list[Any]:
        proc = self.watch[name]
        try:
            return [proc, *proc.children(recursive=True)]
        except self.psutil.Error:
            return []

    def rss(self, name: str) -> int:
        total = 0
        for p in self.tree(name):
            with contextlib.suppress(self.psutil.Error):
                total += p.memory_info().rss
        return total

    def cpu_seconds(self, name: str) -> float:
        total = 0.0
        for p in self.tree(name):
            with contextlib.suppress(self.psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for name in list(self.active):
                value = self.rss(name)
                if value > self.peak.get(name, 0):
                    self.peak[name] = value

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # a run that failed before sampling began
            self._thread.join(2)


# -- the workloads ----------------------------------------------------------------------------


def run_loadgen(args: list[str], cpus: set[int] | None, timeout: float) -> Any:
    out = SCRATCH / f"loadgen-{time.monotonic_ns()}.json"
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    subprocess.run(
        [sys.executable, str(HERE / "loadgen.py"), *args, "--out", str(out)],
        check=True,
        timeout=timeout,
        preexec_fn=preexec,
    )
    with open(out) as f:
        return json.load(f)


def sequential(
    name: str,
    targets: dict[str, str],
    body: dict[str, Any],
    *,
    stream: bool,
    kind: str,
    expected: str,
    warmup: int,
    requests: int,
    models: dict[str, str],
    cpus: set[int] | None,
    block: int,
    headers: dict[str, dict[str, str]] | None = None,
    kinds: dict[str, str] | None = None,
    bodies: dict[str, dict[str, Any]] | None = None,
) -> Any:
    """One sequential workload (loadgen.py in its own process): per path, timings and checks;
    `kinds` and `bodies` override `kind` and `body` per path."""
    spec = {
        "kinds": kinds or {},
        "bodies": bodies or {},
        "headers": {n: h for n, h in (headers or {}).items() if n in targets},
        "targets": targets,
        "body": body,
        "stream": stream,
        "kind": kind,
        "expected_args": expected,
        "warmup": warmup,
        "requests": requests,
        "models": models,
        "block": block,
    }
    path = SCRATCH / f"spec-{name}.json"
    path.write_text(json.dumps(spec))
    log(
        f"{name}: {requests} requests per path, in blocks of {block}, rotating over {', '.join(targets)}"
    )
    return run_loadgen(["sequential", "--spec", str(path)], cpus, timeout=1800)


WRK_SCRIPT = """
local f = io.open("%s", "rb"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
%s
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%%d,"duration_us":%%d,"connect":%%d,"read":%%d,"write":%%d,"status":%%d,"timeout":%%d,"p50_us":%%d,"p99_us":%%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def load_cpu_seconds(mock_pid: int) -> float:
    """CPU seconds the load behind a throughput run has used so far: the load generator (a
    reaped child: `RUSAGE_CHILDREN`), the mock, and the kernel's interrupt and softirq time
    (`/proc/stat`: where loopback packets are processed, on no process's account). The
    difference over a run is what the run cost besides the gateway under test."""
    import resource

    import psutil

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = children.ru_utime + children.ru_stime
    with contextlib.suppress(psutil.Error):
        t = psutil.Process(mock_pid).cpu_times()
        total += t.user + t.system
    with contextlib.suppress(OSError), open("/proc/stat") as f:
        ticks = f.readline().split()[1:8]  # user nice system idle iowait irq softirq
        total += (int(ticks[5]) + int(ticks[6])) / os.sysconf("SC_CLK_TCK")
    return total


def throughput(
    url: str,
    body: bytes,
    concurrency: int,
    duration: float,
    wrk: str | None,
    cpus: set[int] | None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    body_path = SCRATCH / "throughput-body.json"
    body_path.write_bytes(body)
    if wrk is None:
        return run_loadgen(
            [
                "throughput",
                "--url",
                url,
                "--body",
                str(body_path),
                "--concurrency",
                str(concurrency),
                "--duration",
                str(duration),
                *[f"--header={k}: {v}" for k, v in (headers or {}).items()],
            ],
            cpus,
            timeout=duration + 120,
        )
    script = SCRATCH / "post.lua"
    extra = "\n".join(
        f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in (headers or {}).items()
    )
    script.write_text(WRK_SCRIPT % (body_path, extra))
    preexec = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    done = subprocess.run(
        [
            wrk,
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(duration))}s",
            "--timeout",
            "10s",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        timeout=duration + 120,
        preexec_fn=preexec,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed: {done.stdout[-500:]} {done.stderr[-500:]}")
    w = json.loads(line[8:])
    errors = w["connect"] + w["read"] + w["write"] + w["status"] + w["timeout"]
    ok = w["requests"] - w["status"]
    seconds = w["duration_us"] / 1e6
    return {
        "tool": "wrk",
        "requests": ok,
        "errors": errors,
        "seconds": seconds,
        "rps": ok / seconds,
        "p50_us": w["p50_us"],
        "p99_us": w["p99_us"],
        "error_detail": {k: w[k] for k in ("connect", "read", "write", "status", "timeout")},
    }


# -- versions and machine -----------------------------------------------------------------------


def versions_in(py: Path, packages: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\nout={'python': sys.version.split()[0]}\n"
        f"for p in {packages!r}:\n    try: out[p]=m.version(p)\n    except Exception: out[p]='-'\nprint(json.dumps(out))"
    )
    done = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                ram = int(line.split()[1]) * 1024
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "ram_bytes": ram,
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
    }


def git_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
        capture_output=True,
        text=True,
    )
    return (
        done.stdout.strip() + (" (src modified)" if dirty.stdout.strip() else "")
        if done.returncode == 0
        else "?"
    )


# -- main ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="toolwire vs direct vs LiteLLM against a mock upstream"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="seconds per throughput point (default 20; 3 with --quick)",
    )
    parser.add_argument(
        "--concurrency", default="1,16,64", help="throughput concurrency levels (default 1,16,64)"
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="sequential non-streaming requests per path (default 2000)",
    )
    parser.add_argument(
        "--stream-requests", type=int, default=None, help="500-chunk streams per path (default 150)"
    )
    parser.add_argument(
        "--responses-requests",
        type=int,
        default=None,
        help="/v1/responses requests per path and mode (default 500)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a ~2 minute smoke run (short points, fewer requests)"
    )
    parser.add_argument("--skip-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument("--skip-portkey", action="store_true", help="leave Portkey out")
    parser.add_argument(
        "--skip-router", action="store_true", help="leave SMG's Rust router (sglang-router) out"
    )
    parser.add_argument("--portkey-version", default=PORTKEY_VERSION)
    parser.add_argument(
        "--no-workers", action="store_true", help=f"leave out toolwire --workers {WORKERS}"
    )
    parser.add_argument("--litellm-version", default=LITELLM_VERSION)
    parser.add_argument(
        "--patches",
        default=DEFAULT_PATCHES,
        help=f"also measure toolwire with these proposed fixes applied (toolwire_patched.py; default {DEFAULT_PATCHES}; '' for none)",
    )
    parser.add_argument(
        "--no-floors",
        action="store_true",
        help="leave out the floor paths (bare uvicorn, +httpx, +aiohttp)",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin gateways and client to separate CPUs"
    )
    parser.add_argument(
        "--no-wrk", action="store_true", help="use the Python load generator for throughput"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile toolwire with py-spy (writes PROFILE.md)",
    )
    parser.add_argument("--profile-seconds", type=float, default=15.0)
    parser.add_argument(
        "--max-minutes", type=float, default=45.0, help="hard limit on the whole run"
    )
    parser.add_argument("--results-dir", default=str(HERE), help="where RESULTS.md and plots/ go")
    parser.add_argument(
        "--note", default="", help="a line for RESULTS.md (e.g. what else the machine was running)"
    )
    args = parser.parse_args()
    quick = args.quick
    args.duration = args.duration if args.duration is not None else (3.0 if quick else 20.0)
    args.requests = args.requests or (300 if quick else 2000)
    args.stream_requests = args.stream_requests or (20 if quick else 150)
    args.responses_requests = args.responses_requests or (100 if quick else 500)
    args.levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    args.variants = [
        [p.strip() for p in variant.split(",") if p.strip()]
        for variant in args.patches.split(";")
        if variant.strip()
    ][: len(VARIANT_NAMES)]
    return args


class Timeout(Exception):
    pass


class Path_:
    """One way to the mock: its base URL, the process behind it (None: direct), what it serves."""

    def __init__(
        self,
        name: str,
        base: str,
        proc: subprocess.Popen[bytes] | None,
        *,
        responses: bool,
        all_levels: bool,
        headers: dict[str, str] | None = None,
        sequential: bool = True,
        only_a: bool = False,
    ) -> None:
        self.name, self.base, self.proc, self.responses, self.all_levels = (
            name,
            base,
            proc,
            responses,
            all_levels,
        )
        self.headers = headers or {}
        self.sequential = sequential  # False: throughput only
        self.only_a = only_a  # True: workload (a) alone (the key paths: their ratio to each other)


def start_toolwire(
    procs: Processes,
    name: str,
    argv_head: list[str],
    mock_url: str,
    port: int,
    cpus: set[int] | None,
    extra: list[str] | None = None,
    before: Callable[[Path], None] | None = None,
) -> subprocess.Popen[bytes]:
    """`before(db)`: run on the fresh database before the server starts (its API keys)."""
    db = SCRATCH / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(str(db) + suffix).unlink()
    if before is not None:
        before(db)
    # this checkout's src/ first: the venv may hold an editable install of another checkout
    pythonpath = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "TOOLWIRE_LOG_LEVEL": "warning", "PYTHONPATH": pythonpath}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = procs.start(
        name,
        [
            *argv_head,
            "serve",
            "--upstream",
            mock_url,
            "--db",
            f"sqlite:///{db}",
            "--port",
            str(port),
            *(extra or []),
        ],
        env=env,
        cpus=cpus,
        cwd=ROOT,
    )
    wait_http(f"http://127.0.0.1:{port}/health", proc, name)
    return proc


#: The limited key of the key paths: every limit on, none reached by a run (so each request
#: pays the checks, reservations and settlements, and none is refused).
KEY_LIMITS = ["--rpm", "100000000", "--tpm", "100000000000", "--budget", "100000000000000"]


def create_key(db: Path, name: str, limits: list[str]) -> str:
    """`toolwire keys create` on `db`, as an operator would: the key it prints."""
    command = [str(PROJECT_PY), "-m", "toolwire", "keys", "create", name]
    done = subprocess.run(
        [*command, "--db", f"sqlite:///{db}", *limits],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout.split()[0]


def main() -> None:
    args = parse_args()
    ensure_bench_env()
    SCRATCH.mkdir(exist_ok=True)
    ensure_project_env()

    def on_signal(signum: int, frame: Any) -> None:
        raise (
            KeyboardInterrupt
            if signum != signal.SIGALRM
            else Timeout(f"--max-minutes {args.max_minutes} reached")
        )

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(int(args.max_minutes * 60))

    litellm_exe, litellm_why = (
        (None, "skipped (--skip-litellm)")
        if args.skip_litellm
        else ensure_litellm(args.litellm_version)
    )
    if litellm_exe is None:
        log(f"LiteLLM left out: {litellm_why}")
    portkey_js, portkey_why = (
        (None, "skipped (--skip-portkey)")
        if args.skip_portkey
        else ensure_portkey(args.portkey_version)
    )
    if portkey_js is None:
        log(f"Portkey left out: {portkey_why}")
    router_py, router_why = (
        (None, "skipped (--skip-router)") if args.skip_router else ensure_router()
    )
    if router_py is None:
        log(f"sglang-router left out: {router_why}")
    wrk = None if args.no_wrk else find_wrk(allow_install=True)
    wants_aiohttp = any("aiohttp" in v for v in args.variants)
    extra_why = ensure_extra_site() if (not args.no_floors or wants_aiohttp) else ""
    if extra_why:
        log(f"aiohttp unavailable ({extra_why}): no aiohttp floor, no aiohttp patch")
        args.variants = [[p for p in v if p != "aiohttp"] for v in args.variants]

    patch_state: dict[str, str] = {}
    wanted = sorted({p for v in args.variants for p in v})
    if wanted:
        check = subprocess.run(
            [str(PROJECT_PY), str(HERE / "toolwire_patched.py"), "--check", ",".join(wanted)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(EXTRA_SITE)},
        )
        patch_state = (
            json.loads(check.stdout) if check.returncode == 0 else dict.fromkeys(wanted, "applies")
        )
        landed = [p for p, state in patch_state.items() if state == "landed"]
        if landed:
            log(f"already in src/, not patched: {', '.join(landed)}")
    variants: dict[str, list[str]] = {}
    for name, variant in zip(VARIANT_NAMES, args.variants, strict=False):
        applied = [p for p in variant if patch_state.get(p) == "applies"]
        if applied and applied not in variants.values():
            variants[name] = applied

    cpus = sorted(os.sched_getaffinity(0))
    if args.no_pin or len(cpus) < 2:
        gw_cpus = client_cpus = mock_cpus = None
    elif len(cpus) == 2:
        gw_cpus, client_cpus, mock_cpus = {cpus[0]}, {cpus[1]}, {cpus[1]}
    else:
        gw_cpus, client_cpus, mock_cpus = {cpus[0]}, {cpus[1]}, {cpus[2]}
    # `--workers 2` gets two cores of its own where the machine has them (one beside the
    # single gateways' core); on fewer it shares all of them with the load generator and mock
    workers_cpus = {cpus[0], cpus[3]} if gw_cpus is not None and len(cpus) >= 4 else None

    procs = Processes()
    sampler = RssSampler()
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/run.py " + " ".join(sys.argv[1:]),
        "machine": machine(),
        "commit": git_commit(),
        "settings": {
            "duration": args.duration,
            "levels": args.levels,
            "requests": args.requests,
            "stream_requests": args.stream_requests,
            "responses_requests": args.responses_requests,
            "stream_chunks": STREAM_CHUNKS,
            "pinning": None
            if gw_cpus is None
            else {
                "gateways": sorted(gw_cpus),
                "client": sorted(client_cpus or []),
                "mock": sorted(mock_cpus or []),
                "workers": sorted(workers_cpus or []),
            },
            "load_tool": "wrk" if wrk else "python-asyncio",
            "patches": sorted({p for v in variants.values() for p in v}),
            "variants": variants,
            "patch_state": patch_state,
            "blocks": {"a": 50, "b": 10, "d": 25},
        },
        "versions": {
            "toolwire_env": versions_in(
                PROJECT_PY,
                [
                    "toolwire",
                    "uvicorn",
                    "starlette",
                    "httpx",
                    "httpcore",
                    "h11",
                    "anyio",
                    "orjson",
                    "uvloop",
                    "httptools",
                    "aiohttp",
                ],
            ),
            "bench_env": versions_in(
                Path(sys.executable), ["matplotlib", "psutil", "uvloop", "py-spy"]
            ),
        },
        "litellm_note": litellm_why,
        "portkey_note": portkey_why,
        "router_note": router_why,
        "note": args.note,
    }
    if not extra_why and EXTRA_SITE.exists():
        results["versions"]["extra_site"] = {
            r.split("==")[0]: r.split("==")[1] for r in EXTRA_REQUIREMENTS
        }
    if wrk:
        v = subprocess.run([wrk, "-v"], capture_output=True, text=True)
        results["versions"]["wrk"] = (v.stdout or v.stderr).split("[")[0].strip()
    if portkey_js is not None:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True)
        results["versions"]["portkey"] = {
            "gateway": args.portkey_version,
            "node": node.stdout.strip(),
            "overrides": PORTKEY_OVERRIDES,
        }
    if litellm_exe is not None:
        results["versions"]["litellm_env"] = versions_in(
            venv_python(LITELLM_VENV),
            ["litellm", "fastapi", "uvicorn", "httpx", "aiohttp", "openai"],
        )

    try:
        sys.path.insert(0, str(HERE))
        from mock_upstream import SHORT_ARGS, long_arguments

        long_args = long_arguments(STREAM_CHUNKS - 4)[0]

        # -- start everything --------------------------------------------------------------
        planned = (
            ["direct", "toolwire"]
            + list(variants)
            + (["litellm"] if litellm_exe else [])
            + (["portkey"] if portkey_js else [])
            + (["sglang-router"] if router_py else [])
            + ([] if args.no_workers else ["toolwire-workers"])
            + ["toolwire-key", "toolwire-limited"]
        )
        if not args.no_floors:
            planned += ["floor-bare", "floor-httpx", "floor-plain"] + (
                [] if extra_why else ["floor-aiohttp", "floor-httpx-aiohttp"]
            )
        # one mock listener per path (and one to ask for /stats): the mock counts, per port, the
        # connections each path opened and the requests it sent upstream
        control_port = free_port()
        mock_ports = {name: free_port() for name in planned}
        upstream = {name: f"http://127.0.0.1:{port}/v1" for name, port in mock_ports.items()}
        mock_url = f"http://127.0.0.1:{control_port}/v1"
        mock = procs.start(
            "mock",
            [
                sys.executable,
                str(HERE / "mock_upstream.py"),
                "--port",
                str(control_port),
                "--extra-ports",
                ",".join(map(str, mock_ports.values())),
                "--chunks",
                str(STREAM_CHUNKS),
            ],
            cpus=mock_cpus,
        )
        wait_http(f"{mock_url}/health", mock, "mock")
        stats = MockStats(f"{mock_url}/stats", mock_ports)
        log(f"mock upstream up at {mock_url} (+ one port per path)")
        paths: list[Path_] = [
            Path_("direct", upstream["direct"], None, responses=True, all_levels=True)
        ]

        port = free_port()
        toolwire = start_toolwire(
            procs,
            "toolwire",
            [str(PROJECT_PY), "-m", "toolwire"],
            upstream["toolwire"],
            port,
            gw_cpus,
        )
        paths.append(
            Path_(
                "toolwire", f"http://127.0.0.1:{port}/v1", toolwire, responses=True, all_levels=True
            )
        )
        log(f"toolwire up at http://127.0.0.1:{port}/v1 (pid {toolwire.pid})")

        # a key without limits and a key with every limit, each on a server of its own (the
        # same command): what the limits cost per request, workload (a) only
        for name, limits in (("toolwire-key", []), ("toolwire-limited", KEY_LIMITS)):
            keys: list[str] = []
            port = free_port()
            keyed = start_toolwire(
                procs,
                name,
                [str(PROJECT_PY), "-m", "toolwire"],
                upstream[name],
                port,
                gw_cpus,
                before=lambda db, limits=limits, keys=keys: keys.append(
                    create_key(db, "bench", limits)
                ),
            )
            paths.append(
                Path_(
                    name,
                    f"http://127.0.0.1:{port}/v1",
                    keyed,
                    responses=False,
                    all_levels=False,
                    headers={"Authorization": f"Bearer {keys[0]}"},
                    only_a=True,
                )
            )
        log("toolwire with a key, and with a limited key, up")

        for name, applied in variants.items():
            port = free_port()
            patched = start_toolwire(
                procs,
                f"toolwire-{name}",
                [str(PROJECT_PY), str(HERE / "toolwire_patched.py"), ",".join(applied)],
                upstream[name],
                port,
                gw_cpus,
            )
            paths.append(
                Path_(name, f"http://127.0.0.1:{port}/v1", patched, responses=True, all_levels=True)
            )
            log(
                f"toolwire + {','.join(applied)} up at http://127.0.0.1:{port}/v1 (pid {patched.pid})"
            )

        if litellm_exe is not None:
            port = free_port()
            cfg = SCRATCH / "litellm.yaml"
            entries = [
                ("mock-tool", "openai/mock-tool"),
                ("mock-stream", "openai/mock-stream"),
                # the Responses bridge: `openai/chat_completions/<model>` makes LiteLLM translate
                # /v1/responses into chat completions (a plain openai/ model would pass
                # /v1/responses through to the upstream's own Responses endpoint)
                ("mock-tool-bridge", "openai/chat_completions/mock-tool"),
            ]
            cfg.write_text(
                "model_list:\n"
                + "".join(
                    f"  - model_name: {name}\n    litellm_params:\n      model: {model}\n      api_base: {upstream['litellm']}\n      api_key: sk-dummy\n"
                    for name, model in entries
                )
                + "litellm_settings:\n  telemetry: false\n  drop_params: true\n"
            )
            ll_env = {
                **os.environ,
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "LITELLM_TELEMETRY": "False",
                "LITELLM_LOG": "WARNING",
                "LITELLM_MODE": "PRODUCTION",
                "DISABLE_SCHEMA_UPDATE": "true",
                "NO_DOCS": "True",
                "NO_REDOC": "True",
            }
            ll_env.pop("DATABASE_URL", None)
            litellm = procs.start(
                "litellm",
                [
                    str(litellm_exe),
                    "--config",
                    str(cfg),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--num_workers",
                    "1",
                    "--telemetry",
                    "False",
                ],
                env=ll_env,
                cpus=gw_cpus,
                cwd=SCRATCH,
            )
            try:
                wait_http(
                    f"http://127.0.0.1:{port}/health/liveliness", litellm, "litellm", timeout=180
                )
                paths.append(
                    Path_(
                        "litellm",
                        f"http://127.0.0.1:{port}/v1",
                        litellm,
                        responses=True,
                        all_levels=True,
                    )
                )
                log(
                    f"LiteLLM {args.litellm_version} up at http://127.0.0.1:{port}/v1 (pid {litellm.pid})"
                )
            except RuntimeError as exc:
                results["litellm_note"] = f"the LiteLLM proxy did not start: {exc}"
                log(results["litellm_note"])
                procs.stop(litellm)

        if portkey_js is not None:
            port = free_port()
            portkey = procs.start(
                "portkey",
                ["node", str(portkey_js), f"--port={port}", "--headless"],
                env={**os.environ, "NODE_ENV": "production"},
                cpus=gw_cpus,
                cwd=PORTKEY_DIR,
            )
            try:
                wait_http(f"http://127.0.0.1:{port}/", portkey, "portkey", timeout=90)
                # Portkey takes its upstream from each request's headers
                paths.append(
                    Path_(
                        "portkey",
                        f"http://127.0.0.1:{port}/v1",
                        portkey,
                        responses=True,
                        all_levels=True,
                        headers={
                            "x-portkey-provider": "openai",
                            "x-portkey-custom-host": upstream["portkey"],
                        },
                    )
                )
                log(
                    f"Portkey {args.portkey_version} up at http://127.0.0.1:{port}/v1 (pid {portkey.pid})"
                )
            except RuntimeError as exc:
                results["portkey_note"] = f"the Portkey gateway did not start: {exc}"
                log(results["portkey_note"])
                procs.stop(portkey)

        if router_py is not None:
            # SMG's Rust router: the chat door's workloads ((a), (b), (c)), one core like the rest
            port = free_port()
            router = procs.start(
                "sglang-router",
                router_argv(router_py, port, upstream["sglang-router"]),
                cpus=gw_cpus,
            )
            try:
                wait_http(f"http://127.0.0.1:{port}/health", router, "sglang-router", timeout=90)
                paths.append(
                    Path_(
                        "sglang-router",
                        f"http://127.0.0.1:{port}/v1",
                        router,
                        responses=False,
                        all_levels=True,
                    )
                )
                log(f"sglang-router {ROUTER_VERSION} up at http://127.0.0.1:{port}/v1")
            except RuntimeError as exc:
                results["router_note"] = f"sglang-router did not start: {exc}"
                log(results["router_note"])
                procs.stop(router)

        if not args.no_workers:
            # Two workers need two cores: pinned apart from the load generator and the mock
            # on a machine of 4 cores or more, sharing all of them on a smaller one (the
            # report then gives the bound that sharing puts on the ratio, from this run)
            port = free_port()
            workers = start_toolwire(
                procs,
                "toolwire-workers",
                [str(PROJECT_PY), "-m", "toolwire"],
                upstream["toolwire-workers"],
                port,
                workers_cpus,
                ["--workers", str(WORKERS)],
            )
            paths.append(
                Path_(
                    "toolwire-workers",
                    f"http://127.0.0.1:{port}/v1",
                    workers,
                    responses=False,
                    all_levels=False,
                    sequential=False,
                )
            )
            log(
                f"toolwire --workers {WORKERS} up at http://127.0.0.1:{port}/v1 (pid {workers.pid})"
            )

        if not args.no_floors:
            for mode in ("bare", "httpx", "aiohttp", "plain", "httpx-aiohttp"):
                if "aiohttp" in mode and extra_why:
                    continue
                port = free_port()
                floor = procs.start(
                    f"floor-{mode}",
                    [
                        str(PROJECT_PY),
                        str(HERE / "floors.py"),
                        "--mode",
                        mode,
                        "--upstream",
                        upstream[f"floor-{mode}"],
                        "--port",
                        str(port),
                        "--chunks",
                        str(STREAM_CHUNKS),
                    ],
                    cpus=gw_cpus,
                )
                wait_http(f"http://127.0.0.1:{port}/health", floor, f"floor-{mode}")
                paths.append(
                    Path_(
                        f"floor-{mode}",
                        f"http://127.0.0.1:{port}/v1",
                        floor,
                        responses=False,
                        all_levels=False,
                    )
                )
            log("floors up: " + ", ".join(p.name for p in paths if p.name.startswith("floor-")))

        for p in paths:
            if p.proc is not None:
                sampler.add(p.name, p.proc.pid)
        sampler.start()
        time.sleep(1.0)
        idle_rss = {name: sampler.rss(name) for name in sampler.watch}
        chat_all = {p.name: f"{p.base}/chat/completions" for p in paths if not p.only_a}
        chat_a = {p.name: f"{p.base}/chat/completions" for p in paths if p.sequential}
        chat = {n: url for n, url in chat_a.items() if n in chat_all}
        headers = {p.name: p.headers for p in paths if p.headers}

        upstream_seen: dict[str, Any] = {}
        results["upstream"] = upstream_seen

        def measured(
            key: str,
            targets: dict[str, str],
            body: dict[str, Any],
            *,
            warmup: int,
            requests: int,
            **kw: Any,
        ) -> Any:
            before = stats.snapshot()
            out = sequential(
                key,
                targets,
                body,
                warmup=warmup,
                requests=requests,
                cpus=client_cpus,
                headers=headers,
                **kw,
            )
            upstream_seen[key] = MockStats.delta(
                before, stats.snapshot(), {n: warmup + requests for n in targets}
            )
            return out

        # -- (a) sequential non-streaming with a tool call -----------------------------------
        body_a = {"model": "mock-tool", "messages": MESSAGES, "tools": TOOLS}
        results["a"] = measured(
            "a",
            chat_a,
            body_a,
            stream=False,
            kind="chat",
            expected=SHORT_ARGS,
            warmup=min(200, args.requests // 5),
            requests=args.requests,
            models={},
            block=50,
        )
        # -- (b) one 500-chunk streamed tool call -------------------------------------------
        body_b = {"model": "mock-stream", "messages": MESSAGES, "tools": TOOLS, "stream": True}
        results["b"] = measured(
            "b",
            chat,
            body_b,
            stream=True,
            kind="chat",
            expected=long_args,
            warmup=max(3, args.stream_requests // 10),
            requests=args.stream_requests,
            models={},
            block=10,
        )
        # -- (d) /v1/responses with a function tool ------------------------------------------
        responses = {p.name: f"{p.base}/responses" for p in paths if p.responses}
        body_d = {
            "model": "mock-tool",
            "input": "What is the weather in Paris right now?",
            "tools": RESPONSES_TOOLS,
        }
        models_d = {"litellm": "mock-tool-bridge"}
        results["d"] = {}
        for mode, stream in (("non-streaming", False), ("streaming", True)):
            results["d"][mode] = measured(
                f"d-{mode}",
                responses,
                {**body_d, "stream": stream},
                stream=stream,
                kind="responses",
                expected=SHORT_ARGS,
                warmup=min(50, args.responses_requests // 5),
                requests=args.responses_requests,
                models=models_d,
                block=25,
            )
        # -- (f) /v1/responses streaming the 500-chunk call: argument deltas live ----------------
        # toolwire relays every upstream chunk as a `response.function_call_arguments.delta`.
        results["f"] = measured(
            "f",
            {"toolwire": responses["toolwire"]},
            {**body_d, "model": "mock-stream", "stream": True},
            stream=True,
            kind="responses",
            expected=long_args,
            warmup=max(3, args.stream_requests // 10),
            requests=args.stream_requests,
            models={},
            block=10,
        )
        # -- (g) /v1/messages (Anthropic's door) against direct chat completions --------------
        # The same tool call asked in Anthropic's shape: toolwire's Messages door and LiteLLM's
        # /v1/messages both translate to chat completions; direct is the chat request itself.
        messages = {
            p.name: f"{p.base}/messages" for p in paths if p.name in ("toolwire", "litellm")
        }
        if messages:
            body_g = {
                "model": "mock-tool",
                "max_tokens": 1024,
                "system": MESSAGES[0]["content"],
                "messages": [MESSAGES[1]],
                "tools": ANTHROPIC_TOOLS,
            }
            results["g"] = {}
            for mode, stream, model, expected, count in (
                ("non-streaming", False, "mock-tool", SHORT_ARGS, args.requests),
                ("streaming", True, "mock-stream", long_args, args.stream_requests),
            ):
                targets_g = {"direct": chat["direct"], **messages}
                results["g"][mode] = measured(
                    f"g-{mode}",
                    targets_g,
                    {**body_g, "model": model, "stream": stream},
                    stream=stream,
                    kind="messages",
                    kinds={"direct": "chat"},
                    bodies={
                        "direct": {
                            "model": model,
                            "messages": MESSAGES,
                            "tools": TOOLS,
                            "stream": stream,
                        }
                    },
                    expected=expected,
                    warmup=max(3, min(200, count // 5)),
                    requests=count,
                    models={},
                    block=10,
                )
        # -- (h) Gemini's generateContent against direct chat completions -------------------
        # The same tool call asked in Gemini's shape: toolwire's Gemini door and LiteLLM's
        # `/v1beta/models/{model}:generateContent` both translate to chat completions; direct
        # is the chat request itself. Streaming is `:streamGenerateContent?alt=sse`, as Gemini
        # CLI and the SDKs ask.
        gemini_roots = {
            p.name: p.base.removesuffix("/v1") for p in paths if p.name in ("toolwire", "litellm")
        }
        if gemini_roots:
            body_h = {
                "systemInstruction": {"parts": [{"text": MESSAGES[0]["content"]}]},
                "contents": [{"role": "user", "parts": [{"text": MESSAGES[1]["content"]}]}],
                "tools": GEMINI_TOOLS,
            }
            results["h"] = {}
            for mode, stream, model, expected, count in (
                ("non-streaming", False, "mock-tool", SHORT_ARGS, args.requests),
                ("streaming", True, "mock-stream", long_args, args.stream_requests),
            ):
                action = "streamGenerateContent?alt=sse" if stream else "generateContent"
                targets_h = {
                    "direct": chat["direct"],
                    **{
                        name: f"{root}/v1beta/models/{model}:{action}"
                        for name, root in gemini_roots.items()
                    },
                }
                results["h"][mode] = measured(
                    f"h-{mode}",
                    targets_h,
                    body_h,
                    stream=stream,
                    kind="gemini",
                    kinds={"direct": "chat"},
                    bodies={
                        "direct": {
                            "model": model,
                            "messages": MESSAGES,
                            "tools": TOOLS,
                            "stream": stream,
                        }
                    },
                    expected=expected,
                    warmup=max(3, min(200, count // 5)),
                    requests=count,
                    models={},
                    block=10,
                )
        # -- (c) throughput at each concurrency, (e) RSS under it ------------------------------
        results["c"] = {}
        results["e"] = {"idle_rss": idle_rss, "peak_rss": {}, "cpu_us_per_request": {}}
        body_c = json.dumps(body_a).encode()
        top = max(args.levels)
        sampler.peak.clear()
        for level in args.levels:
            results["c"][str(level)] = {}
            for p in paths:
                if p.only_a or (not p.all_levels and level != top):
                    continue
                name = p.name
                log(f"c: concurrency {level}, {name}, {args.duration:g} s")
                watched = name in sampler.watch
                if watched:
                    sampler.active.add(name)
                    cpu0 = sampler.cpu_seconds(name)
                before = stats.snapshot()
                load0 = load_cpu_seconds(mock.pid)
                res = throughput(
                    chat_all[name], body_c, level, args.duration, wrk, client_cpus, p.headers
                )
                seen = MockStats.delta(
                    before, stats.snapshot(), {name: res["requests"] + res["errors"]}
                )
                upstream_seen.setdefault(f"c{level}", {}).update(seen)
                res["load_cpu_seconds"] = load_cpu_seconds(mock.pid) - load0
                if watched:
                    sampler.active.discard(name)
                    res["cpu_seconds"] = sampler.cpu_seconds(name) - cpu0
                    res["cpu_us_per_request"] = res["cpu_seconds"] / max(res["requests"], 1) * 1e6
                    results["e"]["cpu_us_per_request"].setdefault(name, {})[str(level)] = res[
                        "cpu_us_per_request"
                    ]
                results["c"][str(level)][name] = res
                log(
                    f"   {res['rps']:.0f} req/s, {res['errors']} errors, p50 {res['p50_us'] / 1000:.2f} ms"
                )
                time.sleep(1.0)
        results["e"]["peak_rss"] = dict(sampler.peak)

        if args.profile:
            import profile_toolwire

            try:
                results["profile"] = profile_toolwire.profile(
                    pid=toolwire.pid,
                    chat_url=chat["toolwire"],
                    body_a=body_c,
                    body_b=json.dumps(body_b).encode(),
                    responses_url=responses["toolwire"],
                    body_d=json.dumps({**body_d, "stream": False}).encode(),
                    seconds=args.profile_seconds,
                    wrk=wrk,
                    client_cpus=client_cpus,
                    scratch=SCRATCH,
                    out_dir=Path(args.results_dir),
                    log=log,
                    throughput=throughput,
                )
            except Exception as exc:  # a failed profile must not lose the measured results
                log(f"profile failed: {type(exc).__name__}: {exc}")

    except (KeyboardInterrupt, Timeout) as exc:
        log(f"interrupted ({exc or 'Ctrl-C'}): stopping every process")
        sampler.stop()
        procs.stop_all()
        sys.exit(130)
    finally:
        signal.alarm(0)
        sampler.stop()
        procs.stop_all()

    (SCRATCH / "results.json").write_text(json.dumps(results, indent=1))
    import report

    out = report.write(results, Path(args.results_dir))
    log(f"wrote {out} (raw figures in {SCRATCH / 'results.json'})")
    print(report.summary(results))


if __name__ == "__main__":
    main()
