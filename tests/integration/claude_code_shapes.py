"""Claude Code as its users set it up: the configurations (environment variables) and the shape
of the requests each makes Claude Code send, as logged on loopback (`request_log.py`).

A request's *shape* is what toolwire could react to: which routes are called, how the key is
sent, the body's top-level fields, `thinking`, `output_config`, `context_management`,
`max_tokens` and the `anthropic-beta` features, not the prompt's text or the model's name.
Configurations with one shape exercise the same code in toolwire; the tests run one real
read → edit → run task per distinct shape and replay the logged shape of every configuration
(tests/data/anthropic/claude_code_shapes.json).

`python -m tests.integration.claude_code_shapes --write` logs every configuration with the
installed binary and rewrites that file; `--diff REPORT` writes what changed against it (the
newest release, `make clients-latest`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.request_log import LoggedRequest

ROOT = Path(__file__).parents[2]
SHAPES = ROOT / "tests" / "data" / "anthropic" / "claude_code_shapes.json"

#: Every variable every run needs (docs/clients.md shows the same set).
OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}
TOKEN = {"ANTHROPIC_AUTH_TOKEN": "sk-toolwire-unused"}

#: The configurations of issue #36: name -> the variables set beside OFFLINE.
CONFIGURATIONS: dict[str, dict[str, str]] = {
    "model-unset": {**TOKEN},
    "tier-sonnet": {**TOKEN, "ANTHROPIC_MODEL": "sonnet"},
    "tier-opus": {**TOKEN, "ANTHROPIC_MODEL": "opus"},
    "tier-haiku": {**TOKEN, "ANTHROPIC_MODEL": "haiku"},
    "full-claude-name": {**TOKEN, "ANTHROPIC_MODEL": "claude-sonnet-4-5"},
    "upstream-name": {**TOKEN, "ANTHROPIC_MODEL": "qwen3-coder"},
    "default-models": {
        **TOKEN,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": "glm-4.6",
        "ANTHROPIC_DEFAULT_SONNET_MODEL": "qwen3-coder",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "qwen3-4b",
        "ANTHROPIC_SMALL_FAST_MODEL": "qwen3-4b",
    },
    "api-key": {"ANTHROPIC_API_KEY": "sk-toolwire-unused", "ANTHROPIC_MODEL": "sonnet"},
    "thinking-on": {**TOKEN, "ANTHROPIC_MODEL": "sonnet", "MAX_THINKING_TOKENS": "8000"},
    "thinking-on-full-name": {
        **TOKEN,
        "ANTHROPIC_MODEL": "claude-sonnet-4-5",
        "MAX_THINKING_TOKENS": "8000",
    },
    "thinking-off": {**TOKEN, "ANTHROPIC_MODEL": "claude-sonnet-4-5", "MAX_THINKING_TOKENS": "0"},
    "thinking-off-upstream-name": {
        **TOKEN,
        "ANTHROPIC_MODEL": "qwen3-coder",
        "CLAUDE_CODE_DISABLE_THINKING": "1",
    },
    "model-discovery": {
        **TOKEN,
        "ANTHROPIC_MODEL": "sonnet",
        "CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY": "1",
    },
    "compaction": {**TOKEN, "ANTHROPIC_MODEL": "qwen3-coder"},
}
"""`compaction` also runs `/compact` on the session and goes on after it."""

INTERACTIVE = "interactive-upstream-name"
"""Claude Code's TUI (not `-p`) with `ANTHROPIC_MODEL=qwen3-coder`: it asks for `display:
"updates"`. Logged once under tmux (a headless run cannot ask for it) and replayed only."""

_SHAPE_FIELDS = ("thinking", "output_config", "context_management", "max_tokens", "tool_choice")


def _abstract(value: Any) -> Any:
    """Numbers become their type's name: a budget of 4000 or 8000 is one shape."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return "<number>"
    if isinstance(value, list):
        return [_abstract(v) for v in value]
    if isinstance(value, dict):
        return {k: _abstract(v) for k, v in sorted(value.items())}
    return value


def message_shape(method: str, path: str, headers: dict[str, str], body: Any) -> dict[str, Any]:
    """One request's shape (module docstring)."""
    shape: dict[str, Any] = {"route": f"{method} {path}"}
    if "x-api-key" in headers:
        shape["key"] = "x-api-key"
    elif "authorization" in headers:
        shape["key"] = "authorization"
    if not isinstance(body, dict):
        return shape
    shape["fields"] = sorted(body)
    shape["betas"] = sorted(filter(None, headers.get("anthropic-beta", "").split(",")))
    for name in _SHAPE_FIELDS:
        if name in body:
            shape[name] = body[name] if name == "max_tokens" else _abstract(body[name])
    return shape


def shapes_of(requests: list[LoggedRequest]) -> list[dict[str, Any]]:
    """The distinct shapes of a run's requests, in the order first seen."""
    seen: list[dict[str, Any]] = []
    for request in requests:
        if request.path.startswith("/api/") or request.method == "HEAD":
            continue  # reachability checks: keyless, bodiless, answered the same way always
        shape = message_shape(request.method, request.path, request.headers, request.body)
        if shape not in seen:
            seen.append(shape)
    return seen


def replayable(request: LoggedRequest) -> dict[str, Any]:
    """What the replay test lays over the stored request (tests/data/anthropic/
    claude_code_request.json): the headers and every body field but the long ones."""
    keep = {k: v for k, v in request.headers.items() if k.startswith("anthropic-")}
    if "x-api-key" in request.headers:
        keep["x-api-key"] = "sk-toolwire-unused"
    body = request.body if isinstance(request.body, dict) else {}
    fields = {k: v for k, v in body.items() if k not in ("messages", "system", "tools")}
    if isinstance(fields.get("metadata"), dict):
        fields["metadata"] = {"user_id": "user_0"}
    return {"path": request.path, "headers": keep, "body": fields}


def load() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(SHAPES.read_text())
    return stored


def distinct(stored: dict[str, Any]) -> dict[str, list[str]]:
    """The first configuration of each distinct shape -> the configurations sharing it."""
    groups: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    for name in CONFIGURATIONS:
        key = json.dumps(stored["configurations"][name]["shapes"], sort_keys=True)
        if key not in keys:
            keys[key] = name
            groups[name] = []
        groups[keys[key]].append(name)
    return groups


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Lines saying, per configuration, which parts of its request shapes changed."""
    lines: list[str] = []
    for name in sorted(set(old["configurations"]) | set(new["configurations"])):
        before = old["configurations"].get(name, {}).get("shapes")
        after = new["configurations"].get(name, {}).get("shapes")
        if before is None or after is None:
            continue
        if before == after:
            continue
        lines.append(f"## {name}")
        for index in range(max(len(before), len(after))):
            a = before[index] if index < len(before) else {}
            b = after[index] if index < len(after) else {}
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    lines.append(
                        f"- request {index + 1} `{key}`: {json.dumps(a.get(key))} -> "
                        f"{json.dumps(b.get(key))}"
                    )
    return lines


def _log_all(binary: Path) -> dict[str, Any]:
    """Runs every configuration once (a one-call task) and logs what it sent."""
    from tests.integration.conftest import running_gateway
    from tests.integration.request_log import RequestLog
    from toolwire.testing import Reply

    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    result: dict[str, Any] = {"version": version, "configurations": {}}
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"claude-code-shapes-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    with running_gateway(tmp / "toolwire.db") as gateway:
        gateway.upstream.default = Reply(text="<analysis>a</analysis><summary>s</summary>")
        with RequestLog(gateway.base_url.removesuffix("/v1")).running() as log:
            for name, variables in CONFIGURATIONS.items():
                log.clear()
                work, home = tmp / name / "work", tmp / name / "home"
                work.mkdir(parents=True, exist_ok=True)
                home.mkdir(parents=True, exist_ok=True)
                env = {
                    "PATH": os.environ["PATH"],
                    "HOME": str(home),
                    "ANTHROPIC_BASE_URL": log.base_url,
                    **OFFLINE,
                    **variables,
                }
                runs = [["-p", "say hi"]]
                if name == "compaction":
                    runs.append(["-c", "-p", "/compact"])
                for args in runs:
                    subprocess.run(
                        [str(binary), *args], cwd=work, env=env, capture_output=True, timeout=120
                    )
                messages = [r for r in log.requests if r.path.startswith("/v1/messages")]
                result["configurations"][name] = {
                    "variables": variables,
                    "shapes": shapes_of(log.requests),
                    "request": replayable(messages[-1]) if messages else None,
                }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("--write", action="store_true", help=f"rewrite {SHAPES}")
    parser.add_argument("--diff", type=Path, help="write the changes against the stored shapes")
    options = parser.parse_args()
    logged = _log_all(options.binary.resolve())
    stored = load()
    logged["configurations"][INTERACTIVE] = stored["configurations"][INTERACTIVE]
    if options.write:
        logged["_comment"] = stored.get("_comment", "")
        SHAPES.write_text(json.dumps(logged, indent=1, sort_keys=True) + "\n")
    changes = diff(stored, logged)
    title = f"Claude Code {logged['version']} against the stored {stored['version']}"
    report = "\n".join([f"# {title}", "", *(changes or ["No request shape changed."])]) + "\n"
    if options.diff:
        options.diff.write_text(report)
    sys.stdout.write(report)


if __name__ == "__main__":
    main()
