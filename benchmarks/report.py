"""RESULTS.md and the plots, from the results `run.py` collected (also re-runnable on its JSON):

    benchmarks/.venv-bench/bin/python benchmarks/report.py benchmarks/.scratch/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TARGET_ADDED_P50_MS = 1.0
TARGET_CHUNK_US = 20.0
TARGET_THROUGHPUT_X = 3.0
TARGET_RSS_MB = 150.0
NAMES = {"direct": "direct (mock)", "toolwire": "toolwire", "litellm": "LiteLLM"}
COLORS = {"direct": "#7f7f7f", "toolwire": "#1f77b4", "litellm": "#d62728"}


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
    return "–" if not b or a != a or b != b else f"{a / b:.2f}×"


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def stream_overhead(b: dict[str, Any], name: str) -> float:
    """(gateway p50 total - direct p50 total) / chunks, in microseconds."""
    chunks = 500
    return (pct(b[name]["total_us"], 50) - pct(b["direct"]["total_us"], 50)) / chunks


def names_in(section: dict[str, Any]) -> list[str]:
    return [n for n in ("direct", "toolwire", "litellm") if n in section]


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
    head += " ratio to direct | LiteLLM/toolwire | checked |"
    rule += "---:|---:|---|"
    lines = [head, rule]
    for name in names:
        t = section[name]["total_us"]
        p50 = pct(t, 50)
        row = f"| {NAMES[name]} | {ms(p50)} | {ms(pct(t, 90))} | {ms(pct(t, 99))} | {ms(mean(t))} | "
        row += "–" if name == "direct" else f"{(p50 - direct_p50) / 1000:+.3f}"
        row += " |"
        if ttfb:
            row += f" {ms(pct(section[name]['ttfb_us'], 50))} | {ms(pct(section[name]['marker_us'], 50))} |"
        row += f" {'1.00×' if name == 'direct' else ratio(p50, direct_p50)} | {ratio(p50, tw_p50) if name == 'litellm' else '–'} | {correctness(section[name])} |"
        lines.append(row)
    return lines


def write(results: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = out_dir / "plots"
    plots.mkdir(exist_ok=True)
    made = make_plots(results, plots)
    path = out_dir / "RESULTS.md"
    path.write_text(render(results, [p.relative_to(out_dir) for p in made]))
    return path


def targets(results: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(target, figure, detail, met) for the four targets of the issue."""
    a, b, c, e = results["a"], results["b"], results.get("c", {}), results.get("e", {})
    rows: list[tuple[str, str, str, bool | None]] = []
    added = (pct(a["toolwire"]["total_us"], 50) - pct(a["direct"]["total_us"], 50)) / 1000
    rows.append(("added p50 latency, non-streaming, ≤ 1 ms", f"{added:.3f} ms",
                 f"toolwire p50 {ms(pct(a['toolwire']['total_us'], 50))} ms − direct p50 {ms(pct(a['direct']['total_us'], 50))} ms",
                 added <= TARGET_ADDED_P50_MS))
    per_chunk = stream_overhead(b, "toolwire")
    rows.append(("overhead per streamed chunk ≤ 20 µs", f"{per_chunk:.1f} µs",
                 f"(toolwire p50 {ms(pct(b['toolwire']['total_us'], 50))} ms − direct p50 {ms(pct(b['direct']['total_us'], 50))} ms) / 500",
                 per_chunk <= TARGET_CHUNK_US))
    top = str(max(int(k) for k in c)) if c else None
    if top and "litellm" in c[top]:
        x = c[top]["toolwire"]["rps"] / max(c[top]["litellm"]["rps"], 1e-9)
        rows.append((f"throughput at concurrency {top} ≥ 3× LiteLLM's", f"{x:.2f}×",
                     f"toolwire {c[top]['toolwire']['rps']:.0f} req/s vs LiteLLM {c[top]['litellm']['rps']:.0f} req/s",
                     x >= TARGET_THROUGHPUT_X))
    else:
        rows.append(("throughput at concurrency 64 ≥ 3× LiteLLM's", "not measured", results.get("litellm_note", ""), None))
    peak = e.get("peak_rss", {}).get("toolwire")
    if peak:
        rows.append(("peak RSS under load ≤ 150 MB", f"{mb(peak)} MB", "toolwire process, sampled every 100 ms during (c)",
                     peak / 1e6 <= TARGET_RSS_MB))
    return rows


def render(results: dict[str, Any], plot_paths: list[Path]) -> str:
    m = results["machine"]
    v = results["versions"]
    s = results["settings"]
    tw = v.get("toolwire_env", {})
    ll = v.get("litellm_env", {})
    a, b, c, d, e = results["a"], results["b"], results.get("c", {}), results["d"], results.get("e", {})
    out: list[str] = []
    w = out.append
    w("# Gateway benchmark: what toolwire adds\n")
    w("Generated by `" + results["command"].strip() + f"` on {results['date']} (commit {results['commit']}). "
      "Do not edit by hand: the run rewrites this file and `plots/`.\n")
    w("The same workload three ways, in one run: client → mock upstream (**direct**); client → **toolwire** → mock; "
      "client → **LiteLLM** proxy → mock. The mock (`mock_upstream.py`) answers from pre-encoded bytes. "
      "Published anchors, all against a mock upstream: Bifrost (Go) adds ~0.4–0.6 ms per request, Portkey ~2.4 ms, LiteLLM 2–12 ms.\n")
    w("## Targets\n")
    w("| target | figure | how | met |")
    w("|---|---:|---|---|")
    for name, figure, detail, met in targets(results):
        w(f"| {name} | **{figure}** | {detail} | {'met' if met else ('–' if met is None else '**not met**')} |")
    w("")
    w("## Machine and versions\n")
    w(f"- CPU: {m['cpu']}, {m['cores']} cores ({m['usable_cpus']} usable); RAM {m['ram_bytes'] / 2**30:.1f} GiB; {m['os']}")
    pin = s.get("pinning")
    if pin:
        w(f"- CPU pinning: both gateways on CPU {pin['gateways']}, the load generator on {pin['client']}, the mock on {pin['mock']} "
          "(a gateway's figures are per core; it never competes with the client)")
    else:
        w("- no CPU pinning")
    w(f"- toolwire {tw.get('toolwire', '?')} on Python {tw.get('python', '?')}: uvicorn {tw.get('uvicorn', '?')}, starlette {tw.get('starlette', '?')}, "
      f"httpx {tw.get('httpx', '?')}, httpcore {tw.get('httpcore', '?')}, orjson {tw.get('orjson', '?')}, uvloop {tw.get('uvloop', '?')}, httptools {tw.get('httptools', '?')}; "
      "run as `python -m toolwire serve --upstream MOCK --db sqlite:///… --port P` with `TOOLWIRE_LOG_LEVEL=warning`, everything else default")
    if ll:
        w(f"- LiteLLM {ll.get('litellm', '?')} (`litellm[proxy]`, pinned) on Python {ll.get('python', '?')}: fastapi {ll.get('fastapi', '?')}, uvicorn {ll.get('uvicorn', '?')}, "
          f"httpx {ll.get('httpx', '?')}, aiohttp {ll.get('aiohttp', '?')}, openai {ll.get('openai', '?')}; "
          "`litellm --config … --num_workers 1 --telemetry False`, no database, `LITELLM_LOG=WARNING`, local model-cost map; "
          "models `openai/mock-tool`, `openai/mock-stream`, and `openai/chat_completions/mock-tool` for the Responses bridge")
    else:
        w(f"- LiteLLM: not measured — {results.get('litellm_note', '')}")
    bench = v.get("bench_env", {})
    w(f"- load generator: `loadgen.py` (raw-socket HTTP/1.1 client, Python {bench.get('python', '?')}) for latency; "
      f"{v.get('wrk', 'the asyncio client in loadgen.py')} for throughput")
    w(f"- settings: {s['requests']} sequential requests per path for (a), {s['stream_requests']} streams for (b), "
      f"{s['responses_requests']} per mode for (d), {s['duration']:g} s per throughput point; requests interleaved round-robin "
      "over the paths, one keep-alive connection each, after a warm-up\n")

    w("## (a) Sequential non-streaming chat completion with a tool call\n")
    w("`POST /v1/chat/completions` (system + user message, two tools); the answer is one `get_weather` call. "
      "Every response was checked (one call, name, arguments, `finish_reason`). toolwire's loop asks the upstream for a "
      "stream even when the client did not (`LoopSettings.stream` is always true on the proxy), so toolwire → mock is a "
      "short SSE stream of the same call; LiteLLM asks for a JSON body.\n")
    out.extend(latency_table(a))
    w("")
    w("## (b) Streaming chat completion: 500 chunks carrying a tool call\n")
    w("The mock streams 500 `chat.completion.chunk` events (role, call header, 496 argument pieces of ~4 characters, "
      "finish, usage) and `[DONE]`. Overhead per chunk = (gateway p50 total − direct p50 total) / 500. "
      "*First byte* is the first body byte; *first tool-call byte* the first byte of a chunk carrying `tool_calls`. "
      "toolwire holds tool calls until the turn ends (it assembles and validates them), so it sends the role chunk at once "
      "and the whole call at the end; the arguments were checked to reassemble exactly on every path.\n")
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
        w(f"Each point runs {s['duration']:g} s with {s['load_tool']}; errors are connection errors, timeouts and non-2xx answers. "
          "CPU/request is the gateway process's CPU time over the point divided by its requests.\n")
        w("| concurrency | path | req/s | errors | p50 ms | p99 ms | CPU µs/request | toolwire/direct | LiteLLM/toolwire |")
        w("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for level in levels:
            row = c[level]
            for name in names_in(row):
                r = row[name]
                cpu = r.get("cpu_us_per_request")
                w(f"| {level} | {NAMES[name]} | {r['rps']:.0f} | {r['errors']} | {r['p50_us'] / 1000:.2f} | {r['p99_us'] / 1000:.2f} | "
                  f"{'–' if cpu is None else f'{cpu:.0f}'} | {ratio(r['rps'], row['direct']['rps']) if name == 'toolwire' else '–'} | "
                  f"{ratio(r['rps'], row['toolwire']['rps']) if name == 'litellm' else '–'} |")
        w("")
        w("Direct throughput is the mock's (and the load generator's) ceiling on its CPU; it is far above either gateway, "
          "so the mock is not the bottleneck.\n")
    w("## (d) `/v1/responses` with a function tool\n")
    w("`POST /v1/responses` (`input` text, two function tools); the answer is one `function_call` item. **direct** is the "
      "mock answering natively from pre-encoded Responses bytes; **toolwire** runs its loop (chat-completions stream "
      "upstream, response stored in SQLite, as by default); **LiteLLM** runs its Responses → chat-completions bridge. "
      "Checked: one `get_weather` `function_call` with the right arguments (streaming: in `response.completed`).\n")
    for mode in ("non-streaming", "streaming"):
        w(f"**{mode}**\n")
        out.extend(latency_table(d[mode], ttfb=(mode == "streaming")))
        w("")
    note = results.get("litellm_note")
    if note:
        w(f"LiteLLM: {note}\n")
    w("## (e) Memory under load\n")
    if e.get("peak_rss"):
        w("RSS of each gateway process and its children, sampled every 100 ms during (c).\n")
        w("| gateway | idle RSS MB (after start) | peak RSS MB under (c) | CPU µs/request at each concurrency |")
        w("|---|---:|---:|---|")
        for name in ("toolwire", "litellm"):
            if name in e["peak_rss"]:
                cpu = e.get("cpu_us_per_request", {}).get(name, {})
                cpus = ", ".join(f"c={k}: {v:.0f}" for k, v in sorted(cpu.items(), key=lambda kv: int(kv[0])))
                w(f"| {NAMES[name]} | {mb(e['idle_rss'].get(name, 0))} | {mb(e['peak_rss'][name])} | {cpus} |")
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
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), dpi=90)
    for name in names_in(a):
        t = sorted(x / 1000 for x in a[name]["total_us"])
        if not t:
            continue
        ys = [(i + 1) / len(t) for i in range(len(t))]
        ax1.plot(t, ys, label=f"{NAMES[name]} (p50 {pct(t, 50):.2f} ms)", color=COLORS[name])
        hi = pct(t, 99.5)
        ax2.hist([x for x in t if x <= hi], bins=60, alpha=0.6, label=NAMES[name], color=COLORS[name])
    ax1.set_xscale("log")
    ax1.set_xlabel("latency, ms (log)")
    ax1.set_ylabel("fraction of requests")
    ax1.set_title("(a) non-streaming tool call: latency CDF")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(loc="lower right", fontsize=8)
    ax2.set_xscale("log")
    ax2.set_xlabel("latency, ms (log; up to p99.5)")
    ax2.set_ylabel("requests")
    ax2.set_title("(a) latency histogram")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    path = plots / "latency_a.png"
    fig.savefig(path)
    plt.close(fig)
    made.append(path)

    b = results["b"]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=90)
    names = names_in(b)
    data = [[x / 1000 for x in b[n]["total_us"]] for n in names]
    box = ax.boxplot(data, vert=False, showfliers=False, patch_artist=True)
    ax.set_yticks(range(1, len(names) + 1), [NAMES[n] for n in names])
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
        names = [n for n in ("direct", "toolwire", "litellm") if all(n in c[lv] for lv in levels)]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), dpi=90)
        width = 0.8 / max(len(names), 1)
        for i, name in enumerate(names):
            xs = [j + i * width for j in range(len(levels))]
            rps = [c[lv][name]["rps"] for lv in levels]
            bars = ax1.bar(xs, rps, width, label=NAMES[name], color=COLORS[name])
            ax1.bar_label(bars, [f"{r:.0f}" for r in rps], fontsize=7)
            if name != "direct":
                gw = [c[lv][name]["rps"] for lv in levels]
                bars = ax2.bar(xs, gw, width, label=NAMES[name], color=COLORS[name])
                ax2.bar_label(bars, [f"{r:.0f}" for r in gw], fontsize=7)
        for ax, title in ((ax1, "(c) throughput, log scale"), (ax2, "(c) gateways only, linear")):
            ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(levels))], [f"c={lv}" for lv in levels])
            ax.set_ylabel("requests / s")
            ax.set_title(title)
            ax.legend(fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
        ax1.set_yscale("log")
        fig.tight_layout()
        path = plots / "throughput_c.png"
        fig.savefig(path)
        plt.close(fig)
        made.append(path)
    return made


def summary(results: dict[str, Any]) -> str:
    lines = ["", "target                                        figure        met"]
    for name, figure, _detail, met in targets(results):
        lines.append(f"{name:<46}{figure:<14}{'yes' if met else ('-' if met is None else 'NO')}")
    return "\n".join(lines)


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / ".scratch" / "results.json"
    res = json.loads(src.read_text())
    print(write(res, Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent))
    print(summary(res))
