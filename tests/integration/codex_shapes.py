"""What the Codex CLI sends to `/v1/responses`, logged on loopback (`request_log.py`), as a
shape: the body's fields, its tools' types and names, `include`, `reasoning`, `text`, and the
`openai-beta`-style headers, not the prompt. tests/data/codex_request_shape.json is the stored
one; `python -m tests.integration.codex_shapes --binary CODEX --diff REPORT` logs a run of the
given binary and writes what changed (`make clients-latest`), `--write` stores it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
STORED = ROOT / "tests" / "data" / "codex_request_shape.json"


def request_shape(headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    return {
        "fields": sorted(body),
        "tools": sorted(
            f"{t.get('type')}:{t.get('name') or ''}" for t in tools if isinstance(t, dict)
        ),
        "include": body.get("include"),
        "reasoning": body.get("reasoning"),
        "text": body.get("text"),
        "stream": body.get("stream"),
        "store": body.get("store"),
        "headers": sorted(k for k in headers if k.startswith(("openai-", "x-codex", "session"))),
    }


def log_run(binary: Path) -> tuple[str, dict[str, Any]]:
    from tests.integration.conftest import running_gateway
    from tests.integration.request_log import RequestLog
    from tests.integration.test_clients import OFFLINE
    from toolwire.testing import Reply

    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"codex-shape-{os.getpid()}"
    (tmp / "home" / ".codex").mkdir(parents=True, exist_ok=True)
    (tmp / "work").mkdir(exist_ok=True)
    with running_gateway(tmp / "toolwire.db") as gateway:
        gateway.upstream.default = Reply(text="hello")
        with RequestLog(gateway.base_url.removesuffix("/v1")).running() as log:
            (tmp / "home" / ".codex" / "config.toml").write_text(
                'model = "scripted-model"\nmodel_provider = "toolwire"\n'
                '[model_providers.toolwire]\nname = "toolwire"\n'
                f'base_url = "{log.base_url}/v1"\nwire_api = "responses"\n'
            )
            flags = [arg for setting in OFFLINE for arg in ("-c", setting)]
            subprocess.run(
                [str(binary), "exec", *flags, "--skip-git-repo-check", "say hi"],
                cwd=tmp / "work",
                env={
                    "PATH": os.environ["PATH"],
                    "HOME": str(tmp / "home"),
                    "CODEX_HOME": str(tmp / "home" / ".codex"),
                },
                capture_output=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            logged = next(r for r in log.requests if r.path.startswith("/v1/responses"))
    return version, request_shape(logged.headers, logged.body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, required=True)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--diff", type=Path)
    options = parser.parse_args()
    version, shape = log_run(options.binary.resolve())
    stored = json.loads(STORED.read_text()) if STORED.exists() else {"version": "-", "shape": {}}
    if options.write:
        STORED.write_text(json.dumps({"version": version, "shape": shape}, indent=1) + "\n")
    lines = [
        f"- `{key}`: {json.dumps(stored['shape'].get(key))} -> {json.dumps(shape.get(key))}"
        for key in sorted(set(stored["shape"]) | set(shape))
        if stored["shape"].get(key) != shape.get(key)
    ]
    report = (
        f"# Codex CLI {version} against the stored {stored['version']}\n\n"
        + ("\n".join(lines) or "No request shape changed.")
        + "\n"
    )
    if options.diff:
        options.diff.write_text(report)
    sys.stdout.write(report)


if __name__ == "__main__":
    main()
