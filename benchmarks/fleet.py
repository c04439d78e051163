"""The fleet benchmark (issue #34): routers in front of a simulated fleet of model servers,
side by side in one run, then a replica killed mid-run, the routing cost, and a real check on
two llama-cpp-python servers. Prints a table per part, writes `benchmarks/FLEET.md` and
`benchmarks/plots/fleet.png`.

    .venv/bin/python benchmarks/fleet.py              # everything (~15 minutes on 2 cores)
    .venv/bin/python benchmarks/fleet.py --quick      # fewer sessions, no llama check
    options: --replicas N (default 4), --sessions N, --concurrency N, --turns N,
             --skip-smg, --skip-litellm, --skip-llama, --skip-latency,
             --only-latency (the chat door with one upstream and with eight, alone)

The routers, each in front of the same fresh fleet (cold caches) for each run:

- toolwire's default policy (`affinity`), `round_robin` and `least_outstanding`
  (`toolwire serve --upstream R1 … --upstream Rn --routing-policy P`, the project's venv);
- SMG, SGLang's Rust router (`sglang-router==SMG_VERSION` from PyPI, in
  `benchmarks/.venv-smg`, created here), `--policy cache_aware`;
- LiteLLM's router (`litellm[proxy]==LITELLM_VERSION`, `benchmarks/.venv-litellm`, as
  `run.py` builds it), `routing_strategy: least-busy`, `num_retries: 2`.

The fleet: `fleet_mock.py` servers (one process each) whose time to first token grows with
the uncached part of the prompt (an LRU of prompt prefixes per server) behind a single
prefill queue; they report `cached_tokens`. The workload: agent sessions (a long system
prompt of their own, the same tool list, `--turns` turns each, the whole history every turn,
a tool call each turn and a text answer at the end), half of them with a session header
(`x-session-affinity`), plus one-shot questions; `--concurrency` sessions at a time, all
streamed chat completions, closed loop. Reported per router: the cache-hit ratio (cached over
prompt tokens, as the servers counted), time to first token p50 / p99 (at the servers: the
wait for a server's prefill queue and the prefill), the client's turn latency, throughput,
and load imbalance (each server's time-averaged requests in
flight: max over mean). Then the same run with one server killed (SIGKILL) a third of the way
in: failed requests, by whether anything had reached the client before the failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from fleet_mock import answer_text  # noqa: E402
from run import (  # noqa: E402
    BENCH_REQUIREMENTS,
    BENCH_VENV,
    LITELLM_VERSION,
    PROJECT_PY,
    ensure_litellm,
    ensure_pinned,
    free_port,
    log,
    venv_python,
)

SCRATCH = HERE / ".work" / "fleet"
SMG_VENV = HERE / ".venv-smg"
SMG_VERSION = "0.3.2"
MODEL = "agent-model"
TURN_TIMEOUT = 60.0
"""A request without its answer after this long counts as hung."""

ROUTED = (
    "prompt",
    "session",
    "continuation",
    "load",
    "round_robin",
    "least_outstanding",
    "failover",
    "resume",
)
TARGETS = {
    "cache_hit": "cache-hit ratio of toolwire's default policy on the agent workload >= 0.9 and >= SMG's",
    "imbalance": "load imbalance of toolwire's default policy <= 1.3 (max/mean in flight)",
    "kill_spared": "replica killed: 0 failed requests that had nothing sent yet (toolwire)",
    "kill_clear": "replica killed: every other failure ends with an error event, none hangs",
    "routing_cost": "routing cost <= 20 us per request at 8 replicas",
    "door_latency": "chat door latency with 8 upstreams within 5% of one (p50)",
}


# -- processes --------------------------------------------------------------------------------


class Procs:
    """Every child process, each with a log file; all stopped at the end."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        SCRATCH.mkdir(parents=True, exist_ok=True)
        logfile = open(SCRATCH / f"{name}.log", "wb")  # noqa: SIM115 - kept open with the child
        proc = subprocess.Popen(
            argv, stdout=logfile, stderr=subprocess.STDOUT, env=env or dict(os.environ)
        )
        self.running.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(ValueError):
            self.running.remove(proc)

    def stop_all(self) -> None:
        for proc in list(reversed(self.running)):
            self.stop(proc)


def wait_http(url: str, proc: subprocess.Popen[bytes], name: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited ({proc.returncode}): see {SCRATCH / name}.log")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer {url} in {timeout:.0f} s")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@dataclass
class Replica:
    name: str
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def start_fleet(procs: Procs, count: int, args: argparse.Namespace) -> list[Replica]:
    replicas = []
    for n in range(count):
        port = free_port()
        argv = [str(PROJECT_PY), str(HERE / "fleet_mock.py"), "--port", str(port)]
        argv += ["--name", f"r{n}", "--model", MODEL, "--cache-tokens", str(args.cache_tokens)]
        argv += ["--prefill-tps", str(args.prefill_tps)]
        replicas.append(Replica(f"r{n}", port, procs.start(f"mock-r{n}", argv)))
    for replica in replicas:
        wait_http(replica.url + "/models", replica.proc, f"mock-{replica.name}", 60)
    return replicas


def start_router(
    procs: Procs, kind: str, replicas: list[Replica], smg: Path | None, litellm: Path | None
) -> tuple[str, subprocess.Popen[bytes]]:
    """(the router's /v1 base URL, its process)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    name = kind.replace(" ", "-")
    if kind.startswith("toolwire"):
        policy = kind.split()[1]
        argv = [str(PROJECT_PY), "-m", "toolwire", "serve", "--port", str(port)]
        argv += ["--db", f"sqlite:///{SCRATCH / (name + '.db')}", "--routing-policy", policy]
        for replica in replicas:
            argv += ["--upstream", replica.url]
        env = {**os.environ, "TOOLWIRE_LOG_FORMAT": "off", "TOOLWIRE_LOG_LEVEL": "warning"}
        env["TOOLWIRE_UPSTREAM_PROBE_SECONDS"] = "2"
        (SCRATCH / (name + ".db")).unlink(missing_ok=True)
        proc = procs.start(name, argv, env)
        wait_http(base + "/health", proc, name)
    elif kind.startswith("SMG"):
        assert smg is not None
        argv = [str(smg), "launch", "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--policy", "cache_aware", "--log-level", "warn"]
        argv += ["--prometheus-port", str(free_port()), "--worker-urls"]
        argv += [f"http://127.0.0.1:{r.port}" for r in replicas]
        proc = procs.start(name, argv)
        wait_http(base + "/health", proc, name)
    else:
        assert litellm is not None
        config = SCRATCH / "litellm-fleet.yaml"
        config.write_text(
            "model_list:\n"
            + "".join(
                f"  - model_name: {MODEL}\n    litellm_params:\n      model: openai/{MODEL}\n"
                f"      api_base: {r.url}\n      api_key: sk-unused\n"
                for r in replicas
            )
            + "router_settings:\n  routing_strategy: least-busy\n  num_retries: 2\n"
            + "litellm_settings:\n  telemetry: false\n  drop_params: true\n"
        )
        env = {
            **os.environ,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
            "LITELLM_LOG": "ERROR",
            "DISABLE_SCHEMA_UPDATE": "true",
        }
        env.pop("DATABASE_URL", None)
        argv = [str(litellm), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--num_workers", "1", "--telemetry", "False"]
        proc = procs.start(name, argv, env)
        wait_http(base + "/health/liveliness", proc, name, timeout=300)
    return base + "/v1", proc


# -- the workload -----------------------------------------------------------------------------

WORDS = [
    "build",
    "test",
    "deploy",
    "parser",
    "module",
    "function",
    "class",
    "import",
    "return",
    "value",
    "error",
    "stream",
    "token",
    "cache",
    "replica",
    "router",
    "session",
    "prompt",
    "history",
    "schema",
    "config",
    "server",
    "client",
    "request",
    "answer",
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name}: " + " ".join(WORDS) * 4,
            "parameters": {
                "type": "object",
                # the mock's calls fit these (toolwire checks each call against its schema)
                "properties": {
                    p: {
                        "type": "integer" if p == "step" else "string",
                        "description": " ".join(WORDS),
                    }
                    for p in props
                },
                "required": list(props[:1]),
            },
        },
    }
    for name, props in (
        ("run_step", ("step", "path")),
        ("read_file", ("path", "range")),
        ("edit_file", ("path", "old", "new")),
        ("search", ("query", "glob")),
    )
]


def prose(seed: str, chars: int) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


@dataclass
class Workload:
    sessions: int
    concurrency: int
    turns: int
    oneshots: int
    oneshot_workers: int
    system_chars: int = 12_000
    result_chars: int = 600
    header_share: float = 0.5
    seed: str = "fleet"


@dataclass
class Outcome:
    """One request as the client saw it."""

    ok: bool
    ttft: float | None
    duration: float
    failure: str = ""
    """'' | 'before_content' | 'error_event' | 'truncated' | 'hung' | 'wrong'"""
    detail: str = ""


@dataclass
class RunResult:
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0
    servers: list[dict[str, Any]] = field(default_factory=list)
    killed: str | None = None
    kill_at: int = 0
    """Outcomes after which a server is killed (0: none)."""
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        if self.kill_at and len(self.outcomes) >= self.kill_at:
            self.reached.set()


async def ask(
    client: Any, url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[Outcome, dict[str, Any]]:
    """One streamed chat completion: the outcome and what it said (text, calls)."""
    import httpx

    started = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    done = False
    error = ""
    try:
        async with asyncio.timeout(TURN_TIMEOUT):
            async with client.stream(
                "POST", url + "/chat/completions", json=body, headers=headers
            ) as answer:
                if answer.status_code != 200:
                    detail = (await answer.aread())[:300].decode(errors="replace")
                    return Outcome(
                        False,
                        None,
                        time.perf_counter() - started,
                        "before_content",
                        f"HTTP {answer.status_code}: {detail}",
                    ), {}
                async for line in answer.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        done = True
                        break
                    chunk = json.loads(line[6:])
                    if "error" in chunk and not chunk.get("choices"):
                        error = json.dumps(chunk["error"])[:300]
                        break
                    for choice in chunk.get("choices") or []:
                        delta = choice.get("delta") or {}
                        if ttft is None and (delta.get("content") or delta.get("tool_calls")):
                            ttft = time.perf_counter() - started
                        if delta.get("content"):
                            text.append(delta["content"])
                        for piece in delta.get("tool_calls") or []:
                            call = calls.setdefault(
                                piece.get("index", 0), {"id": "", "name": "", "arguments": ""}
                            )
                            call["id"] = piece.get("id") or call["id"]
                            function = piece.get("function") or {}
                            call["name"] = function.get("name") or call["name"]
                            call["arguments"] += function.get("arguments") or ""
    except TimeoutError:
        return Outcome(False, ttft, time.perf_counter() - started, "hung", "no answer in time"), {}
    except (httpx.HTTPError, OSError) as exc:
        kind = "truncated" if ttft is not None else "before_content"
        return Outcome(
            False, ttft, time.perf_counter() - started, kind, f"{type(exc).__name__}: {exc}"
        ), {}
    duration = time.perf_counter() - started
    said = {"text": "".join(text), "calls": [calls[k] for k in sorted(calls)]}
    if error:
        kind = "error_event" if ttft is not None else "before_content"
        return Outcome(False, ttft, duration, kind, error), said
    if not done:
        kind = "truncated" if ttft is not None else "before_content"
        return Outcome(False, ttft, duration, kind, "the stream ended without [DONE]"), said
    return Outcome(True, ttft, duration), said


async def session(
    client: Any,
    url: str,
    work: Workload,
    number: int,
    result: RunResult,
) -> None:
    tag = f"{work.seed}-session-{number}"
    headers = {"x-session-affinity": tag} if (number % 2 == 0 and work.header_share) else {}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"[{tag}] " + prose(tag, work.system_chars)},
        {"role": "user", "content": f"Task {number}: " + prose(tag + "task", 400)},
    ]
    for turn in range(work.turns):
        final = turn == work.turns - 1
        body = {"model": MODEL, "messages": messages, "tools": TOOLS, "stream": True}
        for _attempt in range(3):  # an agent retries a failed turn
            outcome, said = await ask(client, url, body, headers)
            if outcome.ok:
                outcome = check(outcome, said, messages, final)
            result.add(outcome)
            if outcome.ok:
                break
        else:
            return  # the session gives up
        if final:
            return
        call = said["calls"][0]
        messages = [
            *messages,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": f"step {turn} of {tag}: "
                + prose(f"{tag}-{turn}", work.result_chars)
                + (" [answer]" if turn == work.turns - 2 else ""),
            },
        ]


def check(
    outcome: Outcome, said: dict[str, Any], messages: list[dict[str, Any]], final: bool
) -> Outcome:
    """What a correct answer is: the mock's text for the last message, or one call of the
    step the session is at."""
    last = str(messages[-1]["content"])
    if final:
        if said["text"] != answer_text(last):
            return Outcome(False, outcome.ttft, outcome.duration, "wrong", said["text"][:200])
        return outcome
    calls = said["calls"]
    step = sum(1 for m in messages if m["role"] == "tool")
    try:
        arguments = json.loads(calls[0]["arguments"]) if len(calls) == 1 else None
    except ValueError:
        arguments = None
    if not arguments or arguments.get("step") != step or not calls[0]["id"]:
        return Outcome(False, outcome.ttft, outcome.duration, "wrong", json.dumps(calls)[:200])
    return outcome


async def oneshots(client: Any, url: str, work: Workload, worker: int, result: RunResult) -> None:
    system = "You are a helpful assistant. " + prose("shared-system", 4000)
    for n in range(worker, work.oneshots, work.oneshot_workers):
        question = f"Question {work.seed}-{n}: " + prose(f"q{n}", 300) + " [answer]"
        body = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": question},
            ],
            "stream": True,
        }
        outcome, said = await ask(client, url, body, {})
        if outcome.ok and said["text"] != answer_text(question):
            outcome = Outcome(False, outcome.ttft, outcome.duration, "wrong", said["text"][:200])
        result.add(outcome)


async def drive(
    url: str, work: Workload, kill: Replica | None = None, kill_after: float = 0.3
) -> RunResult:
    import httpx

    expected = work.sessions * work.turns + work.oneshots
    result = RunResult(kill_at=int(expected * kill_after) if kill is not None else 0)
    limits = httpx.Limits(max_connections=work.concurrency + work.oneshot_workers + 8)
    timeout = httpx.Timeout(TURN_TIMEOUT, connect=10)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        gate = asyncio.Semaphore(work.concurrency)

        async def one(number: int) -> None:
            async with gate:
                await session(client, url, work, number, result)

        async def killer() -> None:
            assert kill is not None
            await result.reached.wait()
            kill.proc.send_signal(signal.SIGKILL)
            result.killed = kill.name

        started = time.perf_counter()
        tasks = [one(n) for n in range(work.sessions)]
        tasks += [oneshots(client, url, work, w, result) for w in range(work.oneshot_workers)]
        if kill is not None:
            tasks.append(killer())
        await asyncio.gather(*tasks)
        result.wall = time.perf_counter() - started
    return result


# -- the measures -----------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summarize(result: RunResult) -> dict[str, Any]:
    ok = [o for o in result.outcomes if o.ok]
    servers = [s for s in result.servers if s]
    ttfts = [t for s in servers for t in s["ttfts"]]
    turns = [o.duration for o in ok]
    prompt = sum(s["prompt_tokens"] for s in servers)
    cached = sum(s["cached_tokens"] for s in servers)
    agent_prompt = sum(s.get("agent_prompt_tokens", 0) for s in servers)
    agent_cached = sum(s.get("agent_cached_tokens", 0) for s in servers)
    loads = [s["mean_outstanding"] for s in servers]
    failures: dict[str, int] = {}
    for outcome in result.outcomes:
        if not outcome.ok:
            failures[outcome.failure] = failures.get(outcome.failure, 0) + 1
    return {
        "requests": len(result.outcomes),
        "ok": len(ok),
        "failures": failures,
        "failure_examples": sorted({o.detail[:160] for o in result.outcomes if not o.ok})[:5],
        "cache_hit": cached / prompt if prompt else None,
        "cache_hit_agent": agent_cached / agent_prompt if agent_prompt else None,
        "ttft_p50": percentile(ttfts, 0.5),
        "ttft_p99": percentile(ttfts, 0.99),
        "latency_p50": percentile(turns, 0.5),
        "latency_p99": percentile(turns, 0.99),
        "throughput": len(ok) / result.wall if result.wall else None,
        "imbalance": (max(loads) / statistics.mean(loads))
        if loads and statistics.mean(loads)
        else None,
        "per_server_load": [round(x, 2) for x in loads],
        "wall": result.wall,
        "killed": result.killed,
    }


def routed_reasons(url: str) -> dict[str, int]:
    """toolwire's own count of why each call went where it did (`/metrics`)."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    reasons: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("toolwire_upstream_routed_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            reasons[reason] = reasons.get(reason, 0) + int(float(line.rsplit(" ", 1)[1]))
    return reasons


def server_stats(replicas: list[Replica]) -> list[dict[str, Any]]:
    stats = []
    for replica in replicas:
        try:
            stats.append(get_json(f"http://127.0.0.1:{replica.port}/stats"))
        except OSError:
            stats.append({})  # killed: its counts are gone with it
    return stats


def run_router(
    procs: Procs,
    kind: str,
    args: argparse.Namespace,
    work: Workload,
    smg: Path | None,
    litellm: Path | None,
) -> dict[str, Any]:
    """The router in front of a fresh fleet: the run, then (fresh again) the run with a kill."""
    out: dict[str, Any] = {}
    for phase in ("steady", "kill"):
        replicas = start_fleet(procs, args.replicas, args)
        url, router = start_router(procs, kind, replicas, smg, litellm)
        try:
            log(
                f"{kind}: {phase} run ({work.sessions} sessions x {work.turns} turns, {work.oneshots} one-shots)"
            )
            victim = replicas[0] if phase == "kill" else None
            phased = Workload(**{**asdict(work), "seed": f"{work.seed}-{phase}"})
            result = asyncio.run(drive(url, phased, victim))
            result.servers = server_stats(replicas)
            out[phase] = summarize(result)
            if kind.startswith("toolwire"):
                out[phase]["routed"] = routed_reasons(url.removesuffix("/v1") + "/metrics")
            log(
                f"{kind}: {phase}: "
                + json.dumps({k: v for k, v in out[phase].items() if k != "failure_examples"})
            )
        finally:
            procs.stop(router)
            for replica in replicas:
                procs.stop(replica.proc)
    return out


def routing_cost(replica_counts: tuple[int, ...] = (1, 2, 4, 8, 16)) -> dict[int, float]:
    """Microseconds of CPU one routing decision takes (`FleetRouter.choose`), by fleet size,
    for an agent turn (a 24 kB system prompt, a growing history); half the turns carry a
    session header (64 sessions), the others are keyed by their opening; best of 5."""
    from toolwire.transcript import (
        AssistantMessage,
        SystemMessage,
        ToolCall,
        ToolMessage,
        UserMessage,
    )
    from toolwire.upstream.base import RoutingHints, TurnRequest
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream
    from toolwire.upstream.fleet.replica import Replica as FleetReplica
    from toolwire.upstream.fleet.router import FleetRouter

    transcript: list[Any] = [SystemMessage(prose("cost", 24_000)), UserMessage(prose("task", 400))]
    for n in range(10):
        call = ToolCall(f"call_{n}", "run_step", {"step": n}, json.dumps({"step": n}))
        transcript += [
            AssistantMessage("", [call]),
            ToolMessage(call.id, call.name, prose(str(n), 1200)),
        ]
    costs = {}
    for count in replica_counts:
        adapters = [
            ChatCompletionsUpstream(f"http://127.0.0.1:{9000 + n}/v1") for n in range(count)
        ]
        router = FleetRouter([FleetReplica(f"r{n}", adapters[n]) for n in range(count)])
        rounds = 20_000
        best = math.inf
        for trial in range(5):
            turns = [
                TurnRequest(
                    MODEL,
                    transcript,
                    routing=RoutingHints(session=f"s{trial}-{k % 64}" if k % 2 else None),
                )
                for k in range(rounds)
            ]
            started = time.process_time()  # CPU time: the machine's other load is not ours
            for turn in turns:
                router.choose(turn)
            best = min(best, (time.process_time() - started) / rounds * 1e6)
        costs[count] = best
    return costs


def door_latency(procs: Procs, requests: int, rounds: int = 5) -> dict[str, Any]:
    """p50 of a non-streamed chat completion through toolwire with one upstream (no router)
    and with eight (the router), against the same fast mock (`mock_upstream.py`), requests
    interleaved in blocks by `loadgen.py`. Both servers share one core (the mock and the load
    generator the others), and the figure is the median over `rounds` of each round's ratio
    of p50s: a shared machine's drift moves both sides of a round alike."""
    import loadgen

    cpus = sorted(os.sched_getaffinity(0))
    server_cpus, other_cpus = {cpus[-1]}, set(cpus[:-1]) or {cpus[-1]}

    ports = [free_port() for _ in range(8)]
    argv = [str(PROJECT_PY), str(HERE / "mock_upstream.py"), "--port", str(ports[0])]
    argv += ["--extra-ports", ",".join(str(p) for p in ports[1:])]
    mock = procs.start("latency-mock", argv)
    os.sched_setaffinity(mock.pid, other_cpus)
    wait_http(f"http://127.0.0.1:{ports[0]}/health", mock, "latency-mock", 60)
    targets = {}
    started = []
    for name, upstreams in (("one upstream", ports[:1]), ("eight upstreams", ports)):
        port = free_port()
        argv = [str(PROJECT_PY), "-m", "toolwire", "serve", "--port", str(port)]
        db = SCRATCH / f"latency-{len(upstreams)}.db"
        db.unlink(missing_ok=True)
        argv += ["--db", f"sqlite:///{db}"]
        for upstream in upstreams:
            argv += ["--upstream", f"http://127.0.0.1:{upstream}/v1"]
        env = {**os.environ, "TOOLWIRE_LOG_FORMAT": "off", "TOOLWIRE_LOG_LEVEL": "warning"}
        proc = procs.start(f"latency-{len(upstreams)}", argv, env)
        os.sched_setaffinity(proc.pid, server_cpus)
        wait_http(f"http://127.0.0.1:{port}/health", proc, name)
        started.append(proc)
        targets[name] = f"http://127.0.0.1:{port}/v1/chat/completions"
    from run import MESSAGES
    from run import TOOLS as BENCH_TOOLS

    spec = {
        "targets": targets,
        "body": {"model": "mock-tool", "messages": MESSAGES, "tools": BENCH_TOOLS, "stream": False},
        "stream": False,
        "kind": "chat",
        "expected_args": '{"city": "Paris", "unit": "celsius"}',
        "warmup": 200,
        "requests": requests,
        "models": {},
        "block": 10,
    }
    spec["requests"] = max(requests // rounds, 50)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, other_cpus)  # the load generator runs in this process
    per_round: list[dict[str, Any]] = []
    try:
        for n in range(rounds):
            spec["warmup"] = 200 if n == 0 else 20
            per_round.append(loadgen.sequential(spec))
    finally:
        os.sched_setaffinity(0, mine)
        for proc in started:
            procs.stop(proc)
        procs.stop(mock)
    rows = {}
    for name in targets:
        times = [t for measured in per_round for t in measured[name]["total_us"]]
        rows[name] = {
            "p50_us": percentile(times, 0.5),
            "p99_us": percentile(times, 0.99),
            "errors": sum(m[name]["errors"] + m[name]["bad"] for m in per_round),
            "why": "; ".join(m[name]["why"] for m in per_round if m[name]["why"])[:300],
        }
    ratios = sorted(
        percentile(m["eight upstreams"]["total_us"], 0.5)
        / percentile(m["one upstream"]["total_us"], 0.5)
        for m in per_round
    )
    return {"results": rows, "ratio": ratios[len(ratios) // 2], "ratios": ratios}


def llama_check(procs: Procs, sessions: int, turns: int, rounds: int = 2) -> dict[str, Any]:
    """Two llama-cpp-python servers (the bundled SmolLM2, `--cache`: a RAM cache of prompt
    states) behind toolwire, affinity vs round-robin: time to first token per turn of
    agent-shaped sessions (more sessions than servers, their turns interleaved, so that
    round-robin cannot line up with them by chance), each turn's median over the sessions of
    `rounds` rounds, the policies taking turns first (the machine's load drifts). Each
    server answers one request first: loading the model is no turn's."""
    import httpx

    from toolwire.upstream.local_llama import bundled_model_path

    model = bundled_model_path()
    servers = []
    for n in range(2):
        port = free_port()
        argv = [str(PROJECT_PY), "-m", "toolwire.upstream.llama_child", "--model", str(model)]
        argv += ["--model-alias", "smollm2", "--port", str(port), "--cache", "--n-ctx", "2048"]
        servers.append((port, procs.start(f"llama-{n}", argv)))
    warm = {"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    for port, proc in servers:
        wait_http(f"http://127.0.0.1:{port}/v1/models", proc, f"llama-{port}", 180)
        httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=warm, timeout=300)
    urls = {}
    for policy in ("affinity", "round_robin"):
        port = free_port()
        argv = [str(PROJECT_PY), "-m", "toolwire", "serve", "--port", str(port)]
        db = SCRATCH / f"llama-{policy}.db"
        db.unlink(missing_ok=True)
        argv += ["--db", f"sqlite:///{db}", "--routing-policy", policy]
        for llama_port, _ in servers:
            argv += ["--upstream", f"http://127.0.0.1:{llama_port}/v1"]
        env = {**os.environ, "TOOLWIRE_LOG_FORMAT": "off"}
        proc = procs.start(f"toolwire-llama-{policy}", argv, env)
        wait_http(f"http://127.0.0.1:{port}/health", proc, f"toolwire-llama-{policy}")
        urls[policy] = f"http://127.0.0.1:{port}/v1/chat/completions"
    measured: dict[str, list[list[float]]] = {p: [[] for _ in range(turns)] for p in urls}
    try:
        with httpx.Client(timeout=300) as client:
            for round_no in range(rounds):
                order = list(urls) if round_no % 2 == 0 else list(reversed(urls))
                for policy in order:
                    llama_sessions(
                        client, urls[policy], f"{policy}{round_no}", sessions, measured[policy]
                    )
    finally:
        for _, proc in servers:
            procs.stop(proc)
    results = {
        policy: [statistics.median(turn) for turn in per_turn]
        for policy, per_turn in measured.items()
    }
    for policy, values in results.items():
        log(f"llama {policy}: TTFT per turn " + ", ".join(f"{t * 1000:.0f} ms" for t in values))
    return results


def llama_sessions(
    client: Any, url: str, seed: str, sessions: int, per_turn: list[list[float]]
) -> None:
    """`sessions` sessions of `len(per_turn)` turns, interleaved turn by turn; each turn's
    time to first token into `per_turn`."""
    histories = [
        [
            {
                "role": "system",
                "content": f"You are agent {seed}-{s}. " + prose(f"{seed}{s}", 2400),
            },
            {
                "role": "user",
                "content": "Summarize the notes in one line. " + prose(f"u{seed}{s}", 300),
            },
        ]
        for s in range(sessions)
    ]
    for turn, times in enumerate(per_turn):
        for history in histories:
            body = {
                "model": "smollm2",
                "messages": history,
                "temperature": 0,
                "max_tokens": 12,
                "stream": True,
            }
            started = time.perf_counter()
            first = None
            text = []
            with client.stream("POST", url, json=body) as answer:
                for line in answer.iter_lines():
                    if line.startswith("data: {"):
                        for choice in json.loads(line[6:]).get("choices") or []:
                            if choice["delta"].get("content"):
                                first = first or time.perf_counter() - started
                                text.append(choice["delta"]["content"])
            times.append(first if first is not None else math.nan)
            history += [
                {"role": "assistant", "content": "".join(text)},
                {
                    "role": "user",
                    "content": "More notes: " + prose(f"{seed}{turn}{len(history)}", 500),
                },
            ]


# -- report -----------------------------------------------------------------------------------


def ensure_smg() -> tuple[Path | None, str]:
    """SGLang's router, pinned, in its own venv: (its `smg` command, or None and why not)."""
    return ensure_pinned(SMG_VENV, "sglang-router", SMG_VERSION, "smg")


def fmt(value: Any, spec: str = ".2f", unit: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:{spec}}{unit}"


def report(results: dict[str, Any]) -> str:
    lines = ["# Fleet benchmark", ""]
    meta = results["meta"]
    lines += [
        f"{meta['date']}, commit `{meta['commit']}`, {meta['cpus']} CPUs, load average at start "
        f"{meta['load']}. `{meta['command']}`.",
        "",
        f"Fleet: {meta['replicas']} `fleet_mock.py` servers (prefix cache {meta['cache_tokens']} "
        f"tokens each, prefill {meta['prefill_tps']:.0f} tokens/s behind one queue); workload: "
        f"{meta['sessions']} agent sessions x {meta['turns']} turns ({meta['concurrency']} at a "
        f"time, half with a session header) and {meta['oneshots']} one-shot questions.",
        "",
        "## Routers side by side",
        "",
        "TTFT is the servers' (each request's wait for its server's prefill queue and its "
        "prefill: what routing decides); the turn latency is the client's, request to last byte "
        "(toolwire's chat door hands a tool call over whole, when its turn has ended: a "
        "client's first byte of a tool-call turn is its last).",
        "",
        "The cache-hit ratio is cached over prompt tokens as the servers counted them, for the "
        "agent sessions' turns (the target's workload) and for all requests (one-shots too).",
        "",
        "| router | cache-hit, agent sessions | cache-hit, all | TTFT p50 | TTFT p99 | turn p50 | turn p99 | throughput | load imbalance (max/mean) | failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def ms(value: float | None) -> str:
        return fmt(value and value * 1000, ".0f", " ms")

    for kind, measured in results["routers"].items():
        steady = measured["steady"]
        failed = sum(steady["failures"].values())
        lines.append(
            f"| {kind} | {fmt(steady.get('cache_hit_agent'), '.3f')} | {fmt(steady['cache_hit'], '.3f')} | {ms(steady['ttft_p50'])} "
            f"| {ms(steady['ttft_p99'])} | {ms(steady['latency_p50'])} | {ms(steady['latency_p99'])} "
            f"| {fmt(steady['throughput'], '.1f', ' req/s')} "
            f"| {fmt(steady['imbalance'], '.2f')} | {failed} of {steady['requests']} |"
        )
    lines += [
        "",
        "## One server killed a third of the way in",
        "",
        "| router | requests | failed, nothing sent yet | failed with an error event after content | truncated silently | hung | wrong answer |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, measured in results["routers"].items():
        kill = measured["kill"]
        f = kill["failures"]
        lines.append(
            f"| {kind} | {kill['requests']} | {f.get('before_content', 0)} | {f.get('error_event', 0)} "
            f"| {f.get('truncated', 0)} | {f.get('hung', 0)} | {f.get('wrong', 0)} |"
        )
    routed = {k: m for k, m in results["routers"].items() if "routed" in m["steady"]}
    if routed:
        lines += [
            "",
            "Why toolwire sent each call where it did (its `toolwire_upstream_routed_total`): "
            "`load` is a session moved off its server by load (its prefix computed anew), "
            "`failover` a call made again elsewhere, `resume` a cut answer continued elsewhere.",
            "",
            "| router | run | " + " | ".join(ROUTED) + " |",
            "|---|---|" + "---|" * len(ROUTED),
        ]
        for kind, measured in routed.items():
            for phase in ("steady", "kill"):
                counts = measured[phase].get("routed", {})
                cells = " | ".join(str(counts.get(r, 0)) for r in ROUTED)
                lines.append(f"| {kind} | {phase} | {cells} |")
    examples = {
        k: m["kill"]["failure_examples"]
        for k, m in results["routers"].items()
        if m["kill"]["failure_examples"]
    }
    if examples:
        lines += ["", "What the failures said (first few per router):", ""]
        for kind, said in examples.items():
            for example in said:
                lines.append(f"- {kind}: `{example}`")
    if results.get("routing_cost"):
        lines += ["", "## Routing cost", "", "| replicas | one decision |", "|---|---|"]
        for count, cost in results["routing_cost"].items():
            lines.append(f"| {count} | {cost:.1f} us |")
    latency = results.get("door_latency")
    if latency:
        lines += [
            "",
            "## The chat door with one upstream and with eight",
            "",
            "| toolwire | p50 | p99 |",
            "|---|---|---|",
        ]
        for name, row in latency["results"].items():
            lines.append(
                f"| {name} | {row['p50_us'] / 1000:.3f} ms | {row['p99_us'] / 1000:.3f} ms |"
            )
        if "ratios" in latency:
            lines += [
                "",
                "Both servers on one core, the requests interleaved in blocks; eight over one, "
                "each round's p50s: " + ", ".join(f"{r:.3f}" for r in latency["ratios"]) + ".",
            ]
    llama = results.get("llama")
    if llama:
        lines += [
            "",
            "## Two llama-cpp-python servers (SmolLM2-135M, prompt cache on): TTFT per turn",
            "",
            "Three sessions over two servers, turns interleaved; each turn's median over the "
            "sessions of two rounds (the policies alternating which goes first). Turn 1 is the "
            "whole prompt everywhere; after it, affinity computes only what the turn added.",
            "",
        ]
        turns = len(next(iter(llama.values())))
        lines.append("| policy | " + " | ".join(f"turn {t + 1}" for t in range(turns)) + " |")
        lines.append("|---|" + "---|" * turns)
        for policy, values in llama.items():
            lines.append(f"| {policy} | " + " | ".join(f"{v * 1000:.0f} ms" for v in values) + " |")
    lines += ["", "## Targets", ""]
    for key, (met, figure) in results["targets"].items():
        lines.append(f"- {'met' if met else 'MISSED'}: {TARGETS[key]} — {figure}")
    return "\n".join(lines) + "\n"


def judge(results: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    routers = results["routers"]
    targets: dict[str, tuple[bool, str]] = {}
    ours = routers.get("toolwire affinity", {}).get("steady")
    smg = routers.get("SMG cache_aware", {}).get("steady")
    rr = routers.get("toolwire round_robin", {}).get("steady")
    if ours:
        hit = ours.get("cache_hit_agent") or 0
        smg_hit = smg.get("cache_hit_agent") if smg else None
        met = hit >= 0.9 and (smg_hit is None or hit >= smg_hit)
        rr_hit = rr.get("cache_hit_agent") if rr else None
        targets["cache_hit"] = (
            met,
            f"{hit:.4f} on the agent sessions (SMG {fmt(smg_hit, '.4f')}, round-robin "
            f"{fmt(rr_hit, '.4f')}); all requests: {fmt(ours['cache_hit'], '.4f')} (SMG "
            f"{fmt(smg and smg['cache_hit'], '.4f')})",
        )
        imbalance = ours["imbalance"] or math.inf
        targets["imbalance"] = (imbalance <= 1.3, f"{imbalance:.2f}")
    kill = routers.get("toolwire affinity", {}).get("kill")
    if kill:
        f = kill["failures"]
        targets["kill_spared"] = (
            f.get("before_content", 0) == 0,
            f"{f.get('before_content', 0)} of {kill['requests']}",
        )
        unclear = f.get("truncated", 0) + f.get("hung", 0) + f.get("wrong", 0)
        targets["kill_clear"] = (
            unclear == 0,
            f"{f.get('error_event', 0)} with an error event, {unclear} truncated, hung or wrong",
        )
    cost = results.get("routing_cost")
    if cost:
        eight = cost.get(8) or cost.get("8")
        targets["routing_cost"] = (eight <= 20, f"{eight:.1f} us at 8 replicas")
    latency = results.get("door_latency")
    if latency:
        rows = latency["results"]
        one, eight = rows["one upstream"]["p50_us"], rows["eight upstreams"]["p50_us"]
        ratio = latency.get("ratio", eight / one)
        targets["door_latency"] = (
            ratio <= 1.05,
            f"p50 {one / 1000:.3f} ms with one, {eight / 1000:.3f} ms with eight; "
            f"median of the rounds' ratios {ratio:.3f}x",
        )
    return targets


def plot(results_path: Path) -> None:
    """Draw the figure (run in benchmarks/.venv-bench, which has matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(results_path.read_text())
    routers = results["routers"]
    names = list(routers)
    panels = 4 if results.get("llama") else 3
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.2))
    steady = [routers[n]["steady"] for n in names]
    colors = ["#0969da" if n.startswith("toolwire") else "#8c959f" for n in names]
    short = [
        n.replace("toolwire ", "tw ").replace(" cache_aware", "").replace(" least-busy", "")
        for n in names
    ]
    axes[0].bar(short, [s.get("cache_hit_agent") or 0 for s in steady], color=colors)
    axes[0].set_title("cache-hit ratio (agent sessions)")
    axes[0].axhline(0.9, color="#cf222e", linewidth=1, linestyle="--")
    p50 = [(s["ttft_p50"] or 0) * 1000 for s in steady]
    p99 = [(s["ttft_p99"] or 0) * 1000 for s in steady]
    x = range(len(names))
    axes[1].bar([i - 0.2 for i in x], p50, width=0.4, label="p50", color="#0969da")
    axes[1].bar([i + 0.2 for i in x], p99, width=0.4, label="p99", color="#bc4c00")
    axes[1].set_xticks(list(x), short)
    axes[1].set_title("server time to first token (ms)")
    axes[1].legend()
    axes[2].bar(short, [s["imbalance"] or 0 for s in steady], color=colors)
    axes[2].axhline(1.3, color="#cf222e", linewidth=1, linestyle="--")
    axes[2].set_title("load imbalance (max/mean in flight)")
    if results.get("llama"):
        for policy, values in results["llama"].items():
            axes[3].plot(
                range(1, len(values) + 1), [v * 1000 for v in values], marker="o", label=policy
            )
        axes[3].set_title("2 x llama-cpp-python: TTFT per turn (ms)")
        axes[3].set_xlabel("turn")
        axes[3].legend()
    for ax in axes[:3]:
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    out = HERE / "plots" / "fleet.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110)


def draw(results_path: Path) -> None:
    py = venv_python(BENCH_VENV)
    if not py.exists():
        log(f"creating {BENCH_VENV.relative_to(ROOT)} for the plot")
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", *BENCH_REQUIREMENTS], check=True
        )
    subprocess.run(
        [str(py), str(Path(__file__).resolve()), "--plot", str(results_path)], check=True
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--oneshots", type=int, default=120)
    parser.add_argument("--cache-tokens", type=int, default=100_000)
    parser.add_argument("--prefill-tps", type=float, default=20_000)
    parser.add_argument("--skip-smg", action="store_true")
    parser.add_argument("--skip-litellm", action="store_true")
    parser.add_argument("--skip-llama", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--latency-requests", type=int, default=3000)
    parser.add_argument(
        "--only-latency",
        action="store_true",
        help="only the chat door with one upstream and with eight; printed, FLEET.md untouched",
    )
    parser.add_argument("--only", help="comma-separated router kinds to run (debugging)")
    parser.add_argument("--plot", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.turns, args.oneshots = 16, 12, 40
        args.skip_llama = True
        args.latency_requests = 300
    return args


def main() -> None:
    args = parse_args()
    if args.plot:
        plot(args.plot)
        return
    SCRATCH.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.only_latency:
        try:
            latency = door_latency(procs, args.latency_requests)
        finally:
            procs.stop_all()
        print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(json.dumps(latency, indent=1))
        return
    smg, smg_why = (None, "skipped") if args.skip_smg else ensure_smg()
    litellm, litellm_why = (
        (None, "skipped") if args.skip_litellm else ensure_litellm(LITELLM_VERSION)
    )
    kinds = ["toolwire affinity", "toolwire round_robin", "toolwire least_outstanding"]
    if smg is not None:
        kinds.append("SMG cache_aware")
    else:
        log(f"SMG left out: {smg_why}")
    if litellm is not None:
        kinds.append("LiteLLM least-busy")
    else:
        log(f"LiteLLM left out: {litellm_why}")
    if args.only:
        kinds = [k for k in kinds if k in args.only.split(",")]
    work = Workload(
        sessions=args.sessions,
        concurrency=args.concurrency,
        turns=args.turns,
        oneshots=args.oneshots,
        oneshot_workers=4,
    )
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    results: dict[str, Any] = {
        "meta": {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "commit": commit,
            "cpus": os.cpu_count(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "command": "python benchmarks/fleet.py " + " ".join(sys.argv[1:]),
            "replicas": args.replicas,
            "cache_tokens": args.cache_tokens,
            "prefill_tps": args.prefill_tps,
            "sessions": args.sessions,
            "turns": args.turns,
            "concurrency": args.concurrency,
            "oneshots": args.oneshots,
        },
        "routers": {},
    }
    try:
        for kind in kinds:
            results["routers"][kind] = run_router(procs, kind, args, work, smg, litellm)
        log("routing cost (FleetRouter.choose)")
        results["routing_cost"] = routing_cost()
        if not args.skip_latency:
            log("the chat door with one upstream and with eight")
            results["door_latency"] = door_latency(procs, args.latency_requests)
        if not args.skip_llama:
            log("two llama-cpp-python servers: affinity vs round-robin")
            results["llama"] = llama_check(procs, sessions=3, turns=5)
    finally:
        procs.stop_all()
    results["targets"] = judge(results)
    text = report(results)
    print(text)
    path = SCRATCH / "fleet.json"
    path.write_text(json.dumps(results, indent=1, default=str))
    (HERE / "FLEET.md").write_text(text)
    try:
        draw(path)
        log(f"wrote {HERE / 'FLEET.md'} and {HERE / 'plots' / 'fleet.png'}")
    except (subprocess.SubprocessError, OSError) as exc:
        log(f"no plot: {exc}")


if __name__ == "__main__":
    main()
