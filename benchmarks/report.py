"""RESULTS.md and the plots, from the results `run.py` collected (also re-runnable on its JSON):

benchmarks/.venv-bench/bin/python benchmarks/report.py benchmarks/.scratch/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# The targets of issue #38: ratios to the uvicorn + uvloop + aiohttp forward floor
# (`floors.py --mode aiohttp`) and to peers, each figure measured in the run that reports it
TARGET_CHAT_VS_FLOOR_X = 1.3  # chat door added p50 ≤ 1.3× the floor's
TARGET_RESPONSES_VS_FLOOR_X = 2.6  # /v1/responses (SQLite) JSON added p50 ≤ 2.6× the floor's
TARGET_RESPONSES_STREAM_VS_FLOOR_X = 4.0  # streaming
TARGET_LIVE_CHUNK_US = 5.0  # on /v1/responses (f) and on the chat door (b)
TARGET_CPU_VS_FLOOR_X = 2.0  # CPU per chat request at the top concurrency ≤ 2.0× the floor's
TARGET_VS_LITELLM_X = 15.0
TARGET_VS_PORTKEY_X = 2.0
TARGET_VS_ROUTER_X = 0.5  # at least half SMG's Rust router's throughput
TARGET_LIMITED_KEY_X = 1.10  # a key with rpm, tpm and a budget costs ≤ 10% more
TARGET_RSS_MB = 100.0
TARGET_WORKERS_X = 1.8
STREAM_CHUNKS = 500
NAMES = {
    "direct": "direct (mock)",
    "toolwire": "toolwire",
    "patched": "toolwire + proposed fixes",
    "patched-b": "toolwire + proposed fixes (b)",
    "litellm": "LiteLLM",
    "portkey": "Portkey",
    "sglang-router": "SMG router (Rust)",
    "toolwire-workers": "toolwire --workers 2 (2 cores)",
    "toolwire-key": "toolwire, a key without limits",
    "toolwire-limited": "toolwire, a key with rpm, tpm and a budget",
    "floor-bare": "floor: uvicorn (uvloop), no upstream",
    "floor-httpx": "floor: uvicorn (uvloop) + httpx forward",
    "floor-aiohttp": "floor: uvicorn (uvloop) + aiohttp forward",
    "floor-plain": "floor: uvicorn (uvloop) + toolwire's plain-HTTP client forward",
    "floor-httpx-aiohttp": "floor: uvicorn (uvloop) + httpx API over aiohttp",
}
ORDER = list(NAMES)
MAIN = ("direct", "toolwire", "patched", "patched-b", "litellm", "portkey", "sglang-router")
VARIANTS = ("patched", "patched-b")
COLORS = {
    "direct": "#7f7f7f",
    "toolwire": "#1f77b4",
    "patched": "#2ca02c",
    "patched-b": "#ff7f0e",
    "litellm": "#d62728",
    "portkey": "#8c564b",
    "sglang-router": "#000000",
    "toolwire-workers": "#0b3d6b",
    "toolwire-key": "#6baed6",
    "toolwire-limited": "#08519c",
    "floor-bare": "#bcbd22",
    "floor-httpx": "#9467bd",
    "floor-aiohttp": "#17becf",
    "floor-plain": "#8c564b",
    "floor-httpx-aiohttp": "#e377c2",
}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def ms(us: float) -> str:
    return "–" if us != us else f"{us / 1000:.3f}"


def ratio(a: float, b: float) -> str:
    if not b or a != a or b != b:
        return "–"
    x = a / b
    return f"{x:.2f}×" if x >= 0.1 else f"{x:.3f}×"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def stream_overhead(b: dict[str, Any], name: str) -> float:
    """(gateway p50 total - direct p50 total) / chunks, in microseconds."""
    chunks = 500
    return (pct(b[name]["total_us"], 50) - pct(b["direct"]["total_us"], 50)) / chunks


def names_in(section: dict[str, Any], only: tuple[str, ...] | None = None) -> list[str]:
    return [n for n in ORDER if n in section and (only is None or n in only)]


def correctness(entry: dict[str, Any]) -> str:
    bad = entry["errors"] + entry["bad"]
    n = len(entry["total_us"]) + entry["errors"]
    return "all correct" if not bad else f"{bad}/{n} wrong: {entry['why'][:80]}"


def latency_table(section: dict[str, Any], *, ttfb: bool = False) -> list[str]:
    names = names_in(section)
    direct_p50 = pct(section["direct"]["total_us"], 50)
    tw_p50 = pct(section["toolwire"]["total_us"], 50)
    head = "| path | p50 ms | p90 ms | p99 ms | mean ms | added p50 ms |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if ttfb:
        head += " first byte p50 ms | first tool-call byte p50 ms |"
        rule += "---:|---:|"
    head += " ratio to direct | peer/toolwire | checked |"
    rule += "---:|---:|---|"
    lines = [head, rule]
    for name in names:
        t = section[name]["total_us"]
        p50 = pct(t, 50)
        row = (
            f"| {NAMES[name]} | {ms(p50)} | {ms(pct(t, 90))} | {ms(pct(t, 99))} | {ms(mean(t))} | "
        )
        row += "–" if name == "direct" else f"{(p50 - direct_p50) / 1000:+.3f}"
        row += " |"
        if ttfb:
            row += f" {ms(pct(section[name]['ttfb_us'], 50))} | {ms(pct(section[name]['marker_us'], 50))} |"
        row += f" {'1.00×' if name == 'direct' else ratio(p50, direct_p50)} | {ratio(p50, tw_p50) if name in ('litellm', 'portkey') else '–'} | {correctness(section[name])} |"
        lines.append(row)
    return lines


def write(results: dict[str, Any], out_dir: Path) -> Path:
    name_variants(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = out_dir / "plots"
    plots.mkdir(exist_ok=True)
    made = make_plots(results, plots)
    path = out_dir / "RESULTS.md"
    path.write_text(render(results, [p.relative_to(out_dir) for p in made]))
    return path


def door_tables(door: dict[str, Any]) -> list[str]:
    """A translating door's workload ((g), (h)): a latency table per mode, and the streaming
    mode's added time per chunk."""
    lines: list[str] = []
    for mode in ("non-streaming", "streaming"):
        section = door.get(mode, {})
        if "toolwire" not in section:
            continue
        lines.append(f"**{mode}**\n")
        lines.extend(latency_table(section, ttfb=(mode == "streaming")))
        if mode == "streaming":
            per = ", ".join(
                f"{NAMES[n]} {_added_ms(section, n) * 1000 / 500:.2f} µs"
                for n in names_in(section)
                if n != "direct"
            )
            lines.append(f"\nPer chunk: {per}.")
        lines.append("")
    return lines


def _added_ms(section: dict[str, Any], who: str) -> float:
    return (pct(section[who]["total_us"], 50) - pct(section["direct"]["total_us"], 50)) / 1000


def _ms_figure(x: float, entry: dict[str, Any]) -> str:
    """A latency figure, or why there is none (every request failed: the reason)."""
    if x == x:
        return f"{x:.3f} ms"
    return f"all failed ({entry['why'].split(':')[0]})" if entry.get("why") else "–"


def live_chunk_us(results: dict[str, Any], who: str = "toolwire") -> float | None:
    """Per streamed chunk with live argument deltas (f): (the 500-chunk call's p50 − the short
    call's p50 on the same door, (d) streaming) / 500, less the mock's own per-chunk time
    ((b) direct − (a) direct, / 500)."""
    f, d = results.get("f", {}), results.get("d", {}).get("streaming", {})
    a, b = results["a"], results["b"]
    if who not in f or who not in d:
        return None
    gateway = pct(f[who]["total_us"], 50) - pct(d[who]["total_us"], 50)
    mock = pct(b["direct"]["total_us"], 50) - pct(a["direct"]["total_us"], 50)
    return (gateway - mock) / STREAM_CHUNKS


def chat_chunk_us(results: dict[str, Any], who: str) -> float | None:
    """What one streamed chunk adds on the chat door, beyond the request's own cost:
    ((b) added p50 − (a) added p50) / 500."""
    a, b = results["a"], results.get("b", {})
    if who not in b or who not in a or "direct" not in b:
        return None
    return (_added_ms(b, who) - _added_ms(a, who)) * 1000 / STREAM_CHUNKS


def targets(
    results: dict[str, Any], who: str = "toolwire"
) -> list[tuple[str, str, str, bool | None]]:
    """(target, figure, how, met) for the targets of issue #38, for `who`."""
    a, c, e = results["a"], results.get("c", {}), results.get("e", {})
    d = results.get("d", {})
    rows: list[tuple[str, str, str, bool | None]] = []
    if who not in a:
        return rows
    label = NAMES[who]
    added = _added_ms(a, who)
    floor = _added_ms(a, "floor-aiohttp") if "floor-aiohttp" in a else None
    bound = TARGET_CHAT_VS_FLOOR_X * floor if floor is not None else None
    rows.append(
        (
            f"chat door added p50 ≤ {TARGET_CHAT_VS_FLOOR_X:g}× the uvicorn + aiohttp floor's",
            _ms_figure(added, a[who]) + (f" ({added / floor:.2f}× floor)" if floor else ""),
            f"(a): {label} p50 {ms(pct(a[who]['total_us'], 50))} ms − direct p50 {ms(pct(a['direct']['total_us'], 50))} ms"
            + (
                f"; floor (uvicorn + aiohttp forward) added {floor:.3f} ms, bound {bound:.3f} ms"
                if bound is not None
                else "; floor not measured"
            ),
            None if bound is None else added <= bound,
        )
    )
    for mode, title, times in (
        ("non-streaming", "JSON", TARGET_RESPONSES_VS_FLOOR_X),
        ("streaming", "streaming", TARGET_RESPONSES_STREAM_VS_FLOOR_X),
    ):
        section = d.get(mode, {})
        if who in section:
            x = _added_ms(section, who)
            rows.append(
                (
                    f"/v1/responses (SQLite) added p50 ≤ {times:g}× the floor's, {title}",
                    _ms_figure(x, section[who]) + (f" ({x / floor:.2f}× floor)" if floor else ""),
                    f"(d) {mode}: {label} p50 {ms(pct(section[who]['total_us'], 50))} ms − direct p50 {ms(pct(section['direct']['total_us'], 50))} ms; the floor's added p50 from (a)",
                    None if floor is None else x <= times * floor,
                )
            )
    live = live_chunk_us(results, who)
    if live is not None:
        rows.append(
            (
                f"per streamed chunk, live deltas on, /v1/responses, ≤ {TARGET_LIVE_CHUNK_US:g} µs",
                f"{live:.2f} µs",
                "(f): ((f) p50 − (d) streaming p50) / 500 − the mock's ((b) − (a) direct) / 500",
                live <= TARGET_LIVE_CHUNK_US,
            )
        )
    chat_chunk = chat_chunk_us(results, who)
    if chat_chunk is not None:
        rows.append(
            (
                f"per streamed chunk, chat door, ≤ {TARGET_LIVE_CHUNK_US:g} µs",
                f"{chat_chunk:.2f} µs",
                "(b): ((b) added p50 − (a) added p50) / 500: what a chunk adds beyond a request's own cost",
                chat_chunk <= TARGET_LIVE_CHUNK_US,
            )
        )
    cpu = e.get("cpu_us_per_request", {}).get(who, {})
    top = str(max(int(k) for k in c)) if c else None
    floor_cpu = e.get("cpu_us_per_request", {}).get("floor-aiohttp", {}).get(top or "")
    if top and top in cpu:
        rows.append(
            (
                f"CPU per chat request ≤ {TARGET_CPU_VS_FLOOR_X:g}× the floor's",
                f"{cpu[top]:.0f} µs"
                + (f" ({cpu[top] / floor_cpu:.2f}× floor)" if floor_cpu else ""),
                f"(c) at concurrency {top}: {label}'s CPU time / requests; the floor's "
                + (f"{floor_cpu:.0f} µs" if floor_cpu else "not measured"),
                None if not floor_cpu else cpu[top] <= TARGET_CPU_VS_FLOOR_X * floor_cpu,
            )
        )
    for peer, need, note in (
        ("litellm", TARGET_VS_LITELLM_X, "litellm_note"),
        ("portkey", TARGET_VS_PORTKEY_X, "portkey_note"),
        ("sglang-router", TARGET_VS_ROUTER_X, "router_note"),
    ):
        if top and peer in c[top] and who in c[top]:
            x = c[top][who]["rps"] / max(c[top][peer]["rps"], 1e-9)
            rows.append(
                (
                    f"throughput at concurrency {top} ≥ {need:g}× {NAMES[peer]}",
                    f"{x:.2f}×",
                    f"{label} {c[top][who]['rps']:.0f} req/s vs {NAMES[peer]} {c[top][peer]['rps']:.0f} req/s (one core each)",
                    x >= need,
                )
            )
        else:
            rows.append(
                (
                    f"throughput at concurrency 64 ≥ {need:g}× {NAMES[peer]}",
                    "not measured",
                    results.get(note, ""),
                    None,
                )
            )
    limited_title = (
        f"a limited key (rpm, tpm, budget) costs ≤ {TARGET_LIMITED_KEY_X:.2f}× an unlimited "
        "one, chat door"
    )
    if who == "toolwire" and "toolwire-key" in a and "toolwire-limited" in a:
        unlimited, limited = _added_ms(a, "toolwire-key"), _added_ms(a, "toolwire-limited")
        rows.append(
            (
                limited_title,
                f"{limited / unlimited:.2f}×",
                f"(a): added p50 with the limited key {limited:.3f} ms, with a key without "
                f"limits {unlimited:.3f} ms (each on a server of its own)",
                limited <= TARGET_LIMITED_KEY_X * unlimited,
            )
        )
    else:
        rows.append((limited_title, "not measured", "no key paths in this run", None))
    peak = e.get("peak_rss", {}).get(who)
    if peak:
        rows.append(
            (
                f"RSS under load ≤ {TARGET_RSS_MB:g} MB",
                f"{mb(peak)} MB",
                f"{label} process, peak of samples every 100 ms during (c)",
                peak / 1e6 <= TARGET_RSS_MB,
            )
        )
    if top and "toolwire-workers" in c[top] and who == "toolwire":
        rows.append(workers_row(results, top))
    return rows


def workers_row(results: dict[str, Any], top: str) -> tuple[str, str, str, bool | None]:
    """The `--workers 2` target's row: its ratio to one worker, and where the two workers
    share the cores with the load, the bound that sharing puts on it."""
    c = results["c"]
    one, two = c[top]["toolwire"]["rps"], c[top]["toolwire-workers"]["rps"]
    pinned = bool((results.get("settings", {}).get("pinning") or {}).get("workers"))
    if pinned:
        how = f"{two:.0f} vs {one:.0f} req/s; the 2 workers on 2 cores of their own"
    else:
        how = f"{two:.0f} vs {one:.0f} req/s; the 2 workers share the machine's cores with the load generator and the mock"
        bound = shared_workers_bound(results, top)
        if bound is not None:
            ratio_max, load_us, worker_us, cores = bound
            how += (
                f": the load took {load_us:.0f} µs of CPU a request beside one worker's {worker_us:.0f} (this run's (c)),"
                f" so {cores} shared cores serve at most {cores} / ({worker_us:.0f} + {load_us:.0f}) µs a second,"
                f" **{ratio_max:.2f}×** what one worker served, however well two workers scale"
            )
    return (
        f"--workers 2 ≥ {TARGET_WORKERS_X:g}× one worker at concurrency {top}",
        f"{two / max(one, 1e-9):.2f}×",
        how,
        two / max(one, 1e-9) >= TARGET_WORKERS_X,
    )


def shared_workers_bound(
    results: dict[str, Any], top: str
) -> tuple[float, float, float, int] | None:
    """The most `--workers 2` can serve, as a multiple of one worker, when its workers share
    every core with the load generator and the mock: (bound, load µs, worker µs, cores).

    From one worker's own run at the same concurrency: it took t µs of CPU a request, and the
    load (wrk, the mock, the kernel's interrupts and softirqs for loopback) o µs a request
    besides. With both on `cores` shared cores, no two workers, however well they scale,
    serve more than cores / (t + o) a second (nor more than 2 / t): a floor measured in the
    run, divided by what one worker served in it."""
    run = results.get("c", {}).get(top, {}).get("toolwire", {})
    load = run.get("load_cpu_seconds")
    worker = run.get("cpu_seconds")
    requests = run.get("requests")
    cores = results.get("machine", {}).get("usable_cpus")
    if not (load and worker and requests and cores and run.get("rps")):
        return None
    t = worker / requests
    o = load / requests
    return min(cores / (t + o), 2 / t) / run["rps"], o * 1e6, t * 1e6, cores


def name_variants(results: dict[str, Any]) -> dict[str, list[str]]:
    """The patched variants of this run, their names set to the patches they apply."""
    settings = results.get("settings", {})
    variants = settings.get("variants") or (
        {"patched": settings["patches"]} if settings.get("patches") else {}
    )
    for name, applied in variants.items():
        NAMES[name] = "toolwire + " + "+".join(applied)
    return variants


def met_text(met: bool | None) -> str:
    return "met" if met else ("–" if met is None else "**not met**")


def render(results: dict[str, Any], plot_paths: list[Path]) -> str:
    m = results["machine"]
    v = results["versions"]
    s = results["settings"]
    tw = v.get("toolwire_env", {})
    ll = v.get("litellm_env", {})
    a, b, c, d, e = (
        results["a"],
        results["b"],
        results.get("c", {}),
        results["d"],
        results.get("e", {}),
    )
    variants = name_variants(results)
    out: list[str] = []
    w = out.append
    w("# Gateway benchmark: what toolwire adds\n")
    w(
        "Generated by `"
        + results["command"].strip()
        + f"` on {results['date']} (commit {results['commit']}). "
        "Do not edit by hand: the run rewrites this file and `plots/`.\n"
    )
    if results.get("note"):
        w(f"> **Note:** {results['note']}\n")
    w(
        "The same workload four ways, in one run: client → mock upstream (**direct**); client → **toolwire** → mock; "
        "client → **Portkey** gateway → mock; client → **LiteLLM** proxy → mock; and, on the chat door's workloads, client → "
        "**SMG's router** (`sglang-router`, Rust) → mock. The mock (`mock_upstream.py`) answers from pre-encoded bytes. "
        "Published anchors, all against a mock upstream: Bifrost (Go) adds ~0.4–0.6 ms per request, Portkey ~2.4 ms, LiteLLM 2–12 ms.\n"
    )
    if variants or any(n.startswith("floor-") for n in a):
        w("Two kinds of extra paths help read the figures (they are not gateways):\n")
        for name, applied in variants.items():
            w(
                f"- **{NAMES[name]}**: the same `toolwire serve` with fixes this benchmark proposes for `src/` "
                f"applied as monkeypatches (`toolwire_patched.py {','.join(applied)}`; each patch is explained there; "
                "a patch whose change has landed in `src/` is left out). It shows what the changes would buy, measured in the same run."
            )
        if any(n.startswith("floor-") for n in a):
            w(
                "- **floors** (`floors.py`): a bare ASGI callable served exactly as toolwire is (uvicorn + httptools on "
                "uvloop), answering from pre-encoded bytes with no upstream, or after forwarding the client's body "
                "unchanged to the mock and reading the whole answer, with a pooled httpx client (httpcore + h11 + anyio), "
                "an aiohttp session (how toolwire's upstream client is built since issue #19: `upstream/transport.py`), or httpx's "
                "API over aiohttp (`httpx_aiohttp.AiohttpTransport`). A Python gateway on this stack cannot add less than its floor."
            )
        w("")
    w("## Targets\n")
    w(
        "Each figure from this run. *met* is toolwire's; Portkey's and LiteLLM's figures are the same "
        "measure taken on them, side by side. Throughput: every gateway on one core (Portkey and "
        "LiteLLM run one process; toolwire one worker). A missed target is analysed in "
        "[MISSED.md](MISSED.md) with its profile ([PROFILE.md](PROFILE.md)).\n"
    )
    base_rows = targets(results, "toolwire")
    peers = [n for n in ("portkey", "litellm") if n in a]
    peer_rows = {n: {r[0]: r[1] for r in targets(results, n)} for n in peers}
    others = [(n, targets(results, n)) for n in variants if n in a]
    w(
        "| target | toolwire | met | "
        + "".join(f"{NAMES[n]} | met | " for n, _ in others)
        + "".join(f"{NAMES[n]} | " for n in peers)
        + "how (toolwire) |"
    )
    w("|---|---:|---|" + "---:|---|" * len(others) + "---:|" * len(peers) + "---|")
    for i, (name, fig, how, met) in enumerate(base_rows):
        cells = "".join(
            f" **{rows[i][1]}** | {met_text(rows[i][3])} |" if i < len(rows) else " – | – |"
            for _, rows in others
        )
        cells += "".join(f" {peer_rows[n].get(name, '–')} |" for n in peers)
        w(f"| {name} | **{fig}** | {met_text(met)} |{cells} {how} |")
    w("")
    w("## Machine and versions\n")
    w(
        f"- CPU: {m['cpu']}, {m['cores']} cores ({m['usable_cpus']} usable); RAM {m['ram_bytes'] / 2**30:.1f} GiB; {m['os']}"
    )
    pin = s.get("pinning")
    if pin:
        w(
            f"- CPU pinning: every gateway (and floor) on CPU {pin['gateways']}, the load generator on {pin['client']}, the mock on {pin['mock']} "
            "(a gateway's figures are per core, and it never competes with the client; idle gateways sleep)"
            + (
                f"; `--workers 2` on CPUs {pin['workers']}"
                if pin.get("workers")
                else "; `--workers 2` unpinned, on every core"
            )
        )
    else:
        w("- no CPU pinning")
    w(
        f"- toolwire {tw.get('toolwire', '?')} on Python {tw.get('python', '?')}: uvicorn {tw.get('uvicorn', '?')}, starlette {tw.get('starlette', '?')}, "
        f"httpx {tw.get('httpx', '?')}, httpcore {tw.get('httpcore', '?')}, h11 {tw.get('h11', '?')}, anyio {tw.get('anyio', '?')}, orjson {tw.get('orjson', '?')}, "
        f"uvloop {tw.get('uvloop', '?')}, httptools {tw.get('httptools', '?')}"
        + (f", aiohttp {tw['aiohttp']}" if tw.get("aiohttp") else "")
        + "; "
        "run as `python -m toolwire serve --upstream MOCK --db sqlite:///… --port P` with `TOOLWIRE_LOG_LEVEL=warning`, everything else default"
    )
    if v.get("extra_site"):
        w(
            "- for the aiohttp floor and patch only: "
            + ", ".join(f"{k} {x}" for k, x in v["extra_site"].items())
            + " (`benchmarks/.pip-extras`)"
        )
    if ll:
        w(
            f"- LiteLLM {ll.get('litellm', '?')} (`litellm[proxy]`, pinned) on Python {ll.get('python', '?')}: fastapi {ll.get('fastapi', '?')}, uvicorn {ll.get('uvicorn', '?')}, "
            f"httpx {ll.get('httpx', '?')}, aiohttp {ll.get('aiohttp', '?')}, openai {ll.get('openai', '?')}; "
            "`litellm --config … --num_workers 1 --telemetry False`, no database, `LITELLM_LOG=WARNING`, local model-cost map; "
            "models `openai/mock-tool`, `openai/mock-stream`, and `openai/chat_completions/mock-tool` for the Responses bridge"
        )
    else:
        w(f"- LiteLLM: not measured — {results.get('litellm_note', '')}")
    pk = v.get("portkey")
    if pk:
        w(
            f"- Portkey: `@portkey-ai/gateway@{pk['gateway']}` (npm, pinned, `benchmarks/.portkey`; "
            + ", ".join(f"`{k}` held at {x}" for k, x in pk.get("overrides", {}).items())
            + f": newer ones make every answer fail, Portkey-AI/gateway#1389; its streams fail anyway on this Node, "
            "HTTP 500 `TypeError: immutable`, #1550, fixed after 1.15.2, the newest in this machine's registry, so it has no "
            f"streaming figures) on Node {pk['node']}: "
            "`node build/start-server.js --port=P --headless`, `NODE_ENV=production`, one process; the upstream named per request "
            "(`x-portkey-provider: openai`, `x-portkey-custom-host: MOCK`). Its `/v1/responses` passes the request through to "
            "the mock's own Responses endpoint (no loop, no storage, no bridge): a lighter job than toolwire's or LiteLLM's there"
        )
    else:
        w(f"- Portkey: not measured — {results.get('portkey_note', '')}")
    if "toolwire-workers" in c.get(str(max(int(k) for k in c)) if c else "", {}):
        pinned = (s.get("pinning") or {}).get("workers")
        w(
            "- **toolwire --workers 2**: the same server as two processes on one port (throughput only); "
            + (
                f"pinned to CPUs {pinned}, apart from the load generator and the mock"
                if pinned
                else "on fewer than 4 cores it is not pinned: its two workers share every core with the load "
                "generator and the mock, and the targets table gives the bound that puts on the ratio"
            )
        )
    bench = v.get("bench_env", {})
    w(
        f"- load generator: `loadgen.py` (raw-socket HTTP/1.1 client, Python {bench.get('python', '?')}) for latency; "
        f"{v.get('wrk', 'the asyncio client in loadgen.py')} for throughput"
    )
    blocks = s.get("blocks", {})
    w(
        f"- settings: {s['requests']} sequential requests per path for (a), {s['stream_requests']} streams for (b), "
        f"{s['responses_requests']} per mode for (d), {s['duration']:g} s per throughput point. Sequential requests go in blocks "
        f"({blocks.get('a', 1)} for (a), {blocks.get('b', 1)} for (b), {blocks.get('d', 1)} for (d)) to each path in turn, the order "
        "rotating, one keep-alive connection per path, after a warm-up; so every path sees the same drift, and a gateway is "
        "not measured right after another process flushed its caches\n"
    )

    w("## (a) Sequential non-streaming chat completion with a tool call\n")
    w(
        "`POST /v1/chat/completions` (system + user message, two tools); the answer is one `get_weather` call. "
        "Every response was checked (one call, name, arguments, `finish_reason`). What each path asked of the mock "
        "(JSON or a stream, and how many new connections it opened) is in the table at the end.\n"
    )
    out.extend(latency_table(a))
    w("")
    w("## (b) Streaming chat completion: 500 chunks carrying a tool call\n")
    w(
        "The mock streams 500 `chat.completion.chunk` events (role, call header, 496 argument pieces of ~4 characters, "
        "finish, usage) and `[DONE]`. Overhead per chunk = (path p50 total − direct p50 total) / 500. "
        "*First byte* is the first body byte; *first tool-call byte* the first byte of a chunk carrying `tool_calls`. "
        "toolwire holds tool calls until the turn ends (it assembles and validates them), so it sends the role chunk at once "
        "and the whole call at the end; the arguments were checked to reassemble exactly on every path.\n"
    )
    out.extend(latency_table(b, ttfb=True))
    w("")
    w("| path | overhead per chunk µs | chunks received |")
    w("|---|---:|---:|")
    for name in names_in(b):
        if name != "direct":
            w(f"| {NAMES[name]} | {stream_overhead(b, name):.1f} | {b[name]['chunks']} |")
    w("")
    w("## (c) Throughput by concurrency (non-streaming, as in (a))\n")
    if c:
        levels = sorted(c, key=int)
        w(
            f"Each point runs {s['duration']:g} s with {s['load_tool']}; errors are connection errors, timeouts and non-2xx answers. "
            "CPU/request is the path's process CPU time over the point divided by its requests. Floors run at the highest "
            "concurrency only.\n"
        )
        w(
            "| concurrency | path | req/s | errors | p50 ms | p99 ms | CPU µs/request | ratio to direct | peer/toolwire |"
        )
        w("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for level in levels:
            row = c[level]
            for name in names_in(row):
                r = row[name]
                cpu = r.get("cpu_us_per_request")
                w(
                    f"| {level} | {NAMES[name]} | {r['rps']:.0f} | {r['errors']} | {r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} | "
                    f"{'–' if cpu is None else f'{cpu:.0f}'} | {ratio(r['rps'], row['direct']['rps']) if name != 'direct' else '1.00×'} | "
                    f"{ratio(r['rps'], row['toolwire']['rps']) if name in ('litellm', 'portkey', 'toolwire-workers') else '–'} |"
                )
        w("")
        w(
            "Direct throughput is the mock's (and the load generator's) ceiling on their shared CPU; it is far above every "
            "gateway, so the mock is not the bottleneck.\n"
        )
    f = results.get("f", {})
    if "toolwire" in f:
        w("## (f) `/v1/responses` streaming the 500-chunk call: argument deltas live\n")
        w(
            "The stream of (b) through the Responses door: toolwire relays every upstream chunk as a "
            "`response.function_call_arguments.delta` event as it arrives, and stores the response. Checked: the call and its "
            "arguments in `response.completed`. Per chunk = (this p50 − (d) streaming p50) / 500, less the mock's own per-chunk "
            "time ((b) direct p50 − (a) direct p50) / 500.\n"
        )
        t = f["toolwire"]["total_us"]
        live = live_chunk_us(results)
        w("| path | p50 ms | p90 ms | p99 ms | events received | per chunk µs | checked |")
        w("|---|---:|---:|---:|---:|---:|---|")
        w(
            f"| toolwire | {ms(pct(t, 50))} | {ms(pct(t, 90))} | {ms(pct(t, 99))} | {f['toolwire']['chunks']} | "
            f"{'–' if live is None else f'{live:.2f}'} | {correctness(f['toolwire'])} |"
        )
        w("")
    g = results.get("g", {})
    if g:
        w("## (g) `/v1/messages` (Anthropic's door) with a tool call\n")
        w(
            "The tool call of (a) and the 500-chunk call of (b), asked in Anthropic's Messages shape: toolwire's "
            "`/v1/messages` runs its loop (chat completions upstream, nothing stored); LiteLLM's `/v1/messages` "
            "translates to chat completions. **direct** is the chat-completions request itself, so *added* is what "
            "the door adds end to end. Checked: one `get_weather` `tool_use` block with the right input (streaming: "
            "the concatenated `input_json_delta`s), `stop_reason` `tool_use`. Per chunk (streaming) = added p50 / 500.\n"
        )
        out.extend(door_tables(g))
    h = results.get("h", {})
    if h:
        w("## (h) Gemini's `generateContent` (the Gemini door) with a tool call\n")
        w(
            "The tool call of (a) and the 500-chunk call of (b), asked in Gemini's shape "
            "(`/v1beta/models/{model}:generateContent`, streaming `:streamGenerateContent?alt=sse`, as Gemini CLI "
            "asks): toolwire's Gemini door runs its loop (chat completions upstream, nothing stored); LiteLLM's "
            "Google GenAI door translates to chat completions. **direct** is the chat-completions request itself, "
            "so *added* is what the door adds end to end. Checked: one `get_weather` `functionCall` part with the "
            "right `args`, `finishReason` `STOP`. Per chunk (streaming) = added p50 / 500.\n"
        )
        out.extend(door_tables(h))
    w("## (d) `/v1/responses` with a function tool\n")
    w(
        "`POST /v1/responses` (`input` text, two function tools); the answer is one `function_call` item. **direct** is the "
        "mock answering natively from pre-encoded Responses bytes; **toolwire** runs its loop (chat completions "
        "upstream, the response stored in SQLite, as by default); **LiteLLM** runs its Responses → chat-completions bridge; "
        "**Portkey** passes the request through to the mock's own Responses endpoint (no loop, no storage). "
        "Checked: one `get_weather` `function_call` with the right arguments (streaming: in `response.completed`).\n"
    )
    for mode in ("non-streaming", "streaming"):
        w(f"**{mode}**\n")
        out.extend(latency_table(d[mode], ttfb=(mode == "streaming")))
        w("")
    note = results.get("litellm_note")
    if note:
        w(f"LiteLLM: {note}\n")
    seen = results.get("upstream", {})
    if seen:
        w("## What each path sent to the mock\n")
        w(
            "Counted by the mock, which listens on one port per path: upstream requests per client request, by kind, and "
            "new TCP connections per client request (0 when the path keeps a pooled keep-alive connection; 1 when it "
            "connects anew for every request). Warm-ups are included; in (c) the requests still in flight when the load "
            "generator stops reach the mock but are not counted by the client, which inflates slow paths' ratios a little.\n"
        )
        w(
            "| workload | path | upstream requests per client request | new connections per client request |"
        )
        w("|---|---|---|---:|")
        labels = {
            "chat_json": "chat JSON",
            "chat_stream": "chat stream",
            "responses_json": "responses JSON",
            "responses_stream": "responses stream",
            "other": "other",
        }
        for key, per_path in seen.items():
            for name in names_in(per_path):
                entry = per_path[name]
                kinds = (
                    ", ".join(
                        f"{v:.2f} {labels.get(k, k)}"
                        for k, v in entry["upstream_per_request"].items()
                    )
                    or "none"
                )
                w(f"| {key} | {NAMES[name]} | {kinds} | {entry['connections_per_request']:.3f} |")
        w("")
    w("## (e) Memory under load\n")
    if e.get("peak_rss"):
        w("RSS of each process and its children, sampled every 100 ms during (c).\n")
        w(
            "| path | idle RSS MB (after start) | peak RSS MB under (c) | CPU µs/request at each concurrency |"
        )
        w("|---|---:|---:|---|")
        for name in ORDER:
            if name in e["peak_rss"]:
                cpu = e.get("cpu_us_per_request", {}).get(name, {})
                cpus = ", ".join(
                    f"c={k}: {x:.0f}" for k, x in sorted(cpu.items(), key=lambda kv: int(kv[0]))
                )
                w(
                    f"| {NAMES[name]} | {mb(e['idle_rss'].get(name, 0))} | {mb(e['peak_rss'][name])} | {cpus} |"
                )
        w("")
    if plot_paths:
        w("## Plots\n")
        for p in plot_paths:
            w(f"![{p.stem}]({p.as_posix()})\n")
    prof = results.get("profile")
    if prof:
        w(f"A py-spy profile of toolwire under this load is in [{prof['file']}]({prof['file']}).\n")
    return "\n".join(out) + "\n"


def make_plots(results: dict[str, Any], plots: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[Path] = []
    a = results["a"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), dpi=80)
    for name in names_in(a):
        t = sorted(x / 1000 for x in a[name]["total_us"])
        if not t:
            continue
        ys = [(i + 1) / len(t) for i in range(len(t))]
        style = "--" if name.startswith("floor-") else "-"
        ax1.plot(t, ys, style, label=f"{NAMES[name]} (p50 {pct(t, 50):.2f} ms)", color=COLORS[name])
        if name in MAIN:
            hi = pct(t, 99.5)
            ax2.hist(
                [x for x in t if x <= hi],
                bins=80,
                alpha=0.55,
                label=NAMES[name],
                color=COLORS[name],
            )
    ax1.set_xscale("log")
    ax1.set_xlabel("latency, ms (log)")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("(a) non-streaming tool call: latency CDF")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(loc="lower right", fontsize=7)
    ax2.set_xscale("log")
    ax2.set_xlabel("latency, ms (log; up to p99.5)")
    ax2.set_ylabel("requests")
    ax2.set_title("(a) latency histogram")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = plots / "latency_a.png"
    fig.savefig(path)
    plt.close(fig)
    made.append(path)

    b = results["b"]
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(names_in(b))), dpi=80)
    names = names_in(b)
    data = [[x / 1000 for x in b[n]["total_us"]] for n in names]
    box = ax.boxplot(data, orientation="horizontal", showfliers=False, patch_artist=True)
    ax.set_yticks(range(1, len(names) + 1), [NAMES[n] for n in names], fontsize=8)
    for patch, n in zip(box["boxes"], names, strict=True):
        patch.set_facecolor(COLORS[n])
        patch.set_alpha(0.6)
    ax.set_xscale("log")
    ax.set_xlabel("total time for the 500-chunk stream, ms (log)")
    ax.set_title("(b) streamed tool call, 500 chunks")
    ax.grid(True, which="both", axis="x", alpha=0.3)
    fig.tight_layout()
    path = plots / "stream_b.png"
    fig.savefig(path)
    plt.close(fig)
    made.append(path)

    c = results.get("c")
    if c:
        levels = sorted(c, key=int)
        names = [n for n in MAIN if all(n in c[lv] for lv in levels)]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.2), dpi=80)
        width = 0.8 / max(len(names), 1)
        gateways = [n for n in names if n != "direct"]
        gwidth = 0.8 / max(len(gateways), 1)
        for i, name in enumerate(names):
            xs = [j + i * width for j in range(len(levels))]
            rps = [c[lv][name]["rps"] for lv in levels]
            bars = ax1.bar(xs, rps, width, label=NAMES[name], color=COLORS[name])
            ax1.bar_label(bars, [f"{r:.0f}" for r in rps], fontsize=7)
        for i, name in enumerate(gateways):
            xs = [j + i * gwidth for j in range(len(levels))]
            rps = [c[lv][name]["rps"] for lv in levels]
            bars = ax2.bar(xs, rps, gwidth, label=NAMES[name], color=COLORS[name])
            ax2.bar_label(bars, [f"{r:.0f}" for r in rps], fontsize=7)
        ax1.set_xticks(
            [j + width * (len(names) - 1) / 2 for j in range(len(levels))],
            [f"c={lv}" for lv in levels],
        )
        ax2.set_xticks(
            [j + gwidth * (len(gateways) - 1) / 2 for j in range(len(levels))],
            [f"c={lv}" for lv in levels],
        )
        for ax, title in ((ax1, "(c) throughput (log scale)"), (ax2, "(c) gateways only (linear)")):
            ax.set_ylabel("requests / s")
            ax.set_title(title)
            ax.legend(fontsize=7, loc="center right" if ax is ax1 else "best")
            ax.grid(True, axis="y", alpha=0.3)
        ax1.set_yscale("log")
        fig.tight_layout()
        path = plots / "throughput_c.png"
        fig.savefig(path)
        plt.close(fig)
        made.append(path)
    return made


def summary(results: dict[str, Any]) -> str:
    """Every target: toolwire's figure and met/missed, Portkey's and LiteLLM's side by side."""
    name_variants(results)
    peers = [n for n in ("portkey", "litellm") if n in results["a"]]
    peer_rows = {n: {r[0]: r[1] for r in targets(results, n)} for n in peers}
    lines = []
    for who in ("toolwire", *VARIANTS):
        rows = targets(results, who)
        if not rows:
            continue
        head = f"  {'target':<62} {NAMES[who]:<28} {'met':<7}" + "".join(
            f" {NAMES[n]:<28}" for n in peers if who == "toolwire"
        )
        lines += ["", head]
        for name, figure, _how, met in rows:
            verdict = "met" if met else ("-" if met is None else "MISSED")
            line = f"  {name:<62} {figure:<28} {verdict:<7}"
            if who == "toolwire":
                line += "".join(f" {peer_rows[n].get(name, '-'):<28}" for n in peers)
            lines.append(line)
    return "\n".join(lines)


if __name__ == "__main__":
    src = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).parent / ".scratch" / "results.json"
    )
    res = json.loads(src.read_text())
    print(write(res, Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent))
    print(summary(res))
