"""Cost of checking a tool call against its tool's schema (issue #35): per call, per client.

The real clients' tool schemas, as they sent them: Claude Code's (tests/data/anthropic/
claude_code_request.json), Codex's (tests/data/codex/codex_request.json; its `custom`
apply_patch is checked by its grammar, not here) and opencode's (tests/data/opencode/
opencode_request.json). For each tool, one typical valid call, and the columns (µs per call,
best of `--rounds` rounds of `--calls` calls, schemas compiled once and cached as the gateway
keeps them):

- `jsonschema`: the pure-Python validator toolwire already depends on, `is_valid`;
- `jsonschema-rs`: the compiled validator the gateway uses, `is_valid`;
- `check`: the gateway's whole check of a one-call turn (`loop/fitting.py` `Fitting.judge`:
  the cached schema's lookup, the validation, the verdict); the target, <= 20 µs;
- `repair`: the same call with one value written as a string (`"5"` for a number, `"true"`
  for a boolean, or `{}` wrapped in `{"arguments": ...}` where the tool has neither), judged
  and repaired; target <= 20 µs;
- `misfit`: `{}` for a tool with a required property: judged, explained for the re-ask;
- `compile`: the schema's first sight in a process (canonical hash + compile), once.

Then the per-chunk cost: a 500-chunk streamed call through the driver and the Responses door's
sink (as `chunk_path.py`), with the check on and off: the check runs once per call, at the
turn's end, so the two figures should match (and with the check on the held call sends no
per-chunk delta at all). It is a benchmark, not a test: it exits 0 and says MISSED.

    PYTHONPATH=src .venv/bin/python benchmarks/argument_check.py [--rounds N] [--calls M]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TARGET_US = 20.0


def client_tools() -> dict[str, dict[str, dict[str, Any]]]:
    """client -> tool name -> its parameters schema (JSON-schema function tools only)."""
    claude = json.loads((DATA / "anthropic" / "claude_code_request.json").read_text())["body"]
    codex = json.loads((DATA / "codex" / "codex_request.json").read_text())["body"]
    opencode = json.loads((DATA / "opencode" / "opencode_request.json").read_text())["body"]
    out: dict[str, dict[str, dict[str, Any]]] = {"Claude Code": {}, "Codex": {}, "opencode": {}}
    for tool in claude["tools"]:
        out["Claude Code"][tool["name"]] = tool["input_schema"]
    for tool in codex["tools"]:
        if tool.get("type") == "function":
            out["Codex"][tool["name"]] = tool["parameters"]
    for tool in opencode["tools"]:
        out["opencode"][tool["function"]["name"]] = tool["function"]["parameters"]
    return out


def example(schema: dict[str, Any]) -> dict[str, Any]:
    """A typical valid call: every required property, and the optional ones of simple types,
    with plausible values (a path, a command, a few lines of code)."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return {
        name: value
        for name, spec in properties.items()
        if (value := _value(name, spec)) is not None
        and (name in required or spec.get("type") in ("string", "integer", "number", "boolean"))
    }


def _value(name: str, spec: dict[str, Any]) -> Any:
    if "enum" in spec:
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "string":
        if "path" in name.lower():
            return "/home/user/project/src/app/main.py"
        if name in ("content", "new_string", "newString", "old_string", "oldString"):
            return "def main() -> None:\n    print('hello')\n" * 8
        return "ls -la src && git status --short"
    if kind == "integer":
        return max(int(spec.get("minimum", 0)), 1) * 10
    if kind == "number":
        return 1000
    if kind == "boolean":
        return False
    if kind == "array":
        item = _value(name, spec.get("items") or {})
        return [item] if item is not None else []
    if kind == "object":
        return example(spec)
    return None


def misstated(call: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The call with one value as a string: a number or a boolean; else wrapped once."""
    properties = schema.get("properties") or {}
    for name, value in call.items():
        kind = (properties.get(name) or {}).get("type")
        if kind in ("integer", "number") and isinstance(value, int):
            return {**call, name: str(value)}
        if kind == "boolean" and isinstance(value, bool):
            return {**call, name: "true" if value else "false"}
    return {"arguments": call}


def per_call(work: Callable[[], object], calls: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            work()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def table(rounds: int, calls: int) -> list[tuple[str, str, list[float]]]:
    import jsonschema
    import jsonschema_rs
    import orjson

    from toolwire.loop.fitting import Fitting
    from toolwire.loop.state import LoopRequest
    from toolwire.tools.argument_fit import Verdict, fit_arguments
    from toolwire.tools.schema_check import cache_clear, checked_schema
    from toolwire.transcript import ToolCall, ToolSpec, UserMessage

    rows: list[tuple[str, str, list[float]]] = []
    for client, tools in client_tools().items():
        specs = [ToolSpec(name, "", schema) for name, schema in tools.items()]
        request = LoopRequest(model="m", input=[UserMessage("go")], client_tools=specs)
        fitting = Fitting(request, {}, None)
        for name, schema in tools.items():
            arguments = example(schema)
            raw = orjson.dumps(arguments).decode()
            plain = jsonschema.Draft202012Validator(schema)
            compiled = jsonschema_rs.validator_for(schema)
            assert plain.is_valid(arguments) and compiled.is_valid(arguments), (name, arguments)
            call = ToolCall("call_1", name, arguments, raw)

            def check(call: ToolCall = call, fitting: Fitting = fitting) -> object:
                return fitting.judge([call], lambda event: None)

            check()  # the schema compiled and cached
            wrong = misstated(arguments, schema)
            checked = checked_schema(schema)
            assert checked is not None
            # a tool that takes any object takes the wrapped call as it is: nothing to repair
            repairable = fit_arguments(checked, wrong, "").verdict is Verdict.REPAIRED

            def repair(wrong: dict[str, Any] = wrong, checked: Any = checked) -> object:
                return fit_arguments(checked, wrong, "")

            missing = bool(schema.get("required"))

            def misfit(checked: Any = checked) -> object:
                return fit_arguments(checked, {}, "{}").explain()

            def compile_once(schema: dict[str, Any] = schema) -> object:
                cache_clear()
                return checked_schema(schema)

            figures = [
                per_call(partial(plain.is_valid, arguments), calls, rounds),
                per_call(partial(compiled.is_valid, arguments), calls, rounds),
                per_call(check, calls, rounds),
                per_call(repair, calls, rounds) if repairable else float("nan"),
                per_call(misfit, calls, rounds) if missing else float("nan"),
                per_call(compile_once, max(calls // 50, 5), rounds),
            ]
            rows.append((client, name, figures))
    return rows


async def per_chunk(rounds: int) -> dict[bool, float]:
    """µs per chunk of a 500-chunk streamed call through the driver and the Responses door's
    sink (as `chunk_path.py` runs them)."""
    from chunk_path import CHUNKS, TOOL_NAME, _header, _sink, frames, transport
    from toolwire.loop.driver import LoopDriver
    from toolwire.loop.state import LoopRequest, LoopSettings
    from toolwire.transcript import ToolSpec, UserMessage
    from toolwire.upstream.chat_completions import ChatCompletionsUpstream

    body = frames()
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    spec = ToolSpec(TOOL_NAME, "", schema)
    out: dict[bool, float] = {}
    for checked in (True, False, True, False):  # interleaved, best of both passes
        adapter = ChatCompletionsUpstream("http://mock/v1", transport=transport(body))
        driver = LoopDriver(adapter)
        best = float("inf")
        for _ in range(rounds):
            builder = _sink(_header(spec), lambda event: None)  # the Responses door's sink
            request = LoopRequest(
                model="mock-stream",
                input=[UserMessage("go")],
                client_tools=[spec],
                settings=LoopSettings(stream=True, check_arguments=checked),
            )
            start = time.perf_counter()
            state = await driver.run(request, builder)
            best = min(best, time.perf_counter() - start)
            assert state.pending_calls and state.pending_calls[0].ok
        await adapter.aclose()
        out[checked] = min(out.get(checked, float("inf")), best / CHUNKS * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rows = table(args.rounds, args.calls)
    columns = ["jsonschema", "jsonschema-rs", "check", "repair", "misfit", "compile"]
    print(f"µs per call, best of {args.rounds} rounds of {args.calls} calls (compile: once)\n")
    print("| client | tool | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    worst = 0.0
    for client, name, figures in rows:
        cells = ["-" if f != f else f"{f:.2f}" for f in figures]
        print(f"| {client} | {name} | " + " | ".join(cells) + " |")
        worst = max(worst, *(f for f in figures[2:4] if f == f))
    verdict = "met" if worst <= TARGET_US else "MISSED"
    print(f"\ncheck and repair, worst tool: {worst:.2f} µs (target <= {TARGET_US:g} µs): {verdict}")
    chunk = asyncio.run(per_chunk(max(args.rounds, 5)))
    print(
        f"per streamed chunk (500-chunk call, driver + Responses sink): "
        f"check on {chunk[True]:.2f} µs, off {chunk[False]:.2f} µs"
    )


if __name__ == "__main__":
    main()
