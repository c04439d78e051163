"""Every example in README.md and docs/*.md runs as written (issue 30).

Each fenced block is one test case, named by file and line; a new doc is picked up by the glob.
What runs, and how (docs/testing.md, "The docs test", says the same for doc authors):

- `python`: run as a script, with the venv's Python, in a scratch directory.
- `sh` / `bash`: each command line runs in bash with the venv's `bin` first on PATH (as after
  `source .venv/bin/activate`). `toolwire serve` (and `make serve`) start in the background and
  must answer `/health`; the model servers the docs name (`vllm serve`, `llama-server`,
  `ollama serve`, `litellm`, …) are not installed here: a ScriptedUpstream stands in for them,
  on the port they name. `make run` / `make test` are the set-up this suite runs after.
- `yaml`: a toolwire config file: `toolwire serve --config FILE` must come up (the test adds
  `--upstream` and `--db` only when the file names none).
- `json` / `toml`: must parse.
- `text`, no language, or another language (`nginx`, …): shown output or other programs'
  files, not run.

Ports: the docs' toolwire port 8080 and model-server ports (8000, 11434, 4000) are replaced by
free ports the test owns (both servers started here, on loopback).

A block that cannot run here says why, in its doc, on the line before its fence:
`<!-- docs-test: skip REASON -->` (kept rare: a real model server, a paid API, a remote host).
`<!-- docs-test: substitute TEXT -->` marks TEXT in the block as a placeholder the doc asks the
reader to replace; the test replaces it with a scratch directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.processes import free_port
from toolwire.testing import Reply, ScriptedUpstream

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
MARKER = re.compile(r"<!--\s*docs-test:\s*(skip|substitute)\s*(.*?)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
RUNNABLE = {"python", "sh", "bash", "yaml", "json", "toml"}
TOOLWIRE_PORTS = ("8080",)
MODEL_PORTS = ("8000", "11434", "4000")
MODEL_SERVERS = ("vllm ", "llama-server ", "ollama ", "litellm ", "python -m sglang", "lmdeploy ")
SET_UP = ("make run", "make test")
IN_CHECKOUT = ("make ", ".venv/")  # commands the README runs from the checkout's root


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str
    skip: str | None
    substitute: str | None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> Iterator[Block]:
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").split("\n")
        index = 0
        while index < len(lines):
            fence = FENCE.match(lines[index])
            if fence is None:
                index += 1
                continue
            end = index + 1
            while not lines[end].strip().startswith("```"):
                end += 1
            indent = len(fence.group(1))
            text = "\n".join(line[indent:] for line in lines[index + 1 : end]) + "\n"
            skip = substitute = None
            previous = lines[index - 1] if index else ""
            marker = MARKER.search(previous)
            if marker and marker.group(1) == "skip":
                skip = marker.group(2)
            elif marker:
                substitute = marker.group(2)
            yield Block(path, index + 1, fence.group(2), text, skip, substitute)
            index = end + 1


ALL = [block for block in blocks() if block.lang in RUNNABLE]


@dataclass(slots=True)
class Servers:
    toolwire: int
    model: int
    db: str
    scratch: Path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A ScriptedUpstream standing in for the model server, and `toolwire serve` before it,
    as the docs have them running, on ports of the test's own."""
    scratch = tmp_path_factory.mktemp("docs")
    model = ScriptedUpstream(
        models=("scripted-model", "my-model", "Qwen/Qwen2.5-7B-Instruct"), default=_answer
    )
    with model:
        port = free_port()
        db = f"sqlite:///{scratch / 'toolwire.db'}"
        with _serve(
            ["serve", "--upstream", model.base_url, "--port", str(port), "--db", db], scratch
        ):
            yield Servers(port, model.port, db, scratch)


def _answer(body: Any) -> Reply:
    """The stand-in model: a call of the first tool offered (as a model asked about the
    weather would make), then, once a tool result is in, a short answer."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    tools = body.get("tools") if isinstance(body, dict) else None
    if tools and messages and messages[-1].get("role") != "tool":
        return Reply(tool_calls=[(tools[0]["function"]["name"], {"city": "Paris"})])
    return Reply(text="It is 18 °C in Paris.")


class _serve:
    def __init__(self, args: list[str], cwd: Path, port: int | None = None) -> None:
        self.args, self.cwd = args, cwd
        self.port = port or int(args[args.index("--port") + 1])

    def __enter__(self) -> subprocess.Popen[bytes]:
        self.log = open(self.cwd / f"serve-{self.port}.log", "w+b")
        self.process = subprocess.Popen(
            [str(BIN / "toolwire"), *self.args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=_env(),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1).is_success:
                    return self.process
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.log.seek(0)
        output = self.log.read().decode()
        self.__exit__()
        raise AssertionError(f"`toolwire {shlex.join(self.args)}` did not come up:\n{output}")

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def _ports(text: str, servers: Servers) -> str:
    for port in TOOLWIRE_PORTS:
        text = re.sub(rf"(?<=:){port}\b", str(servers.toolwire), text)
    for port in MODEL_PORTS:
        text = re.sub(rf"(?<=:){port}\b", str(servers.model), text)
    return text


def _prepare(block: Block, servers: Servers) -> str:
    text = _ports(block.text, servers)
    if block.substitute:
        assert block.substitute in text, f"{block.name}: nothing to substitute"
        text = text.replace(block.substitute, str(servers.scratch))
    return text


@pytest.mark.parametrize("block", ALL, ids=[block.name for block in ALL])
def test_doc_example_runs_as_written(block: Block, servers: Servers) -> None:
    if block.skip is not None:
        assert len(block.skip) > 10, f"{block.name}: a skipped block must say why"
        pytest.skip(block.skip)
    text = _prepare(block, servers)
    if block.lang == "python":
        _run_python(block, text, servers)
    elif block.lang in ("sh", "bash"):
        _run_shell(block, text, servers)
    elif block.lang == "yaml":
        _run_config(block, text, servers)
    elif block.lang == "json":
        json.loads(text)
    elif block.lang == "toml":
        tomllib.loads(text)


def _run_python(block: Block, text: str, servers: Servers) -> None:
    script = servers.scratch / f"example_{block.path.stem}_{block.line}.py"
    script.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=servers.scratch,
        env=_env(TOOLWIRE_DB=servers.db),
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}\n{done.stderr}"


def _commands(text: str) -> Iterator[str]:
    """The block's command lines, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
            yield line


def _run_shell(block: Block, text: str, servers: Servers) -> None:
    """A block's commands share a database of their own (keys made in one block must not
    lock the shared server's other examples out)."""
    exports = f"export TOOLWIRE_DB=sqlite:///{servers.scratch / f'block-{block.path.stem}-{block.line}.db'}; "
    for command in _commands(text):
        if command.startswith(SET_UP):
            continue  # the set-up this suite runs after
        if command.startswith(MODEL_SERVERS):
            continue  # the ScriptedUpstream serves on the port the doc names
        if command.startswith("export "):
            exports += command + "; "
            continue
        if command.startswith("make ") and not (ROOT / ".venv" / ".runtime").exists():
            pytest.skip("`make`'s set-up has not run in this checkout (.venv/.runtime missing)")
        serve = re.search(r"(?:^|[\s/])(toolwire serve\b.*|make serve\b.*)$", command)
        if serve:
            _run_serve(block, command, servers, exports)
            continue
        done = subprocess.run(
            ["bash", "-c", exports + command],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT if command.startswith(IN_CHECKOUT) else servers.scratch,
            env=_env(),
        )
        assert done.returncode == 0, (
            f"{block.name}: `{command}` failed:\n{done.stdout}\n{done.stderr}"
        )


def _run_serve(block: Block, command: str, servers: Servers, exports: str) -> None:
    """A serving command, started in the background on a port of its own; it must come up."""
    if "--upstream" not in command and "UPSTREAM=" not in command and "--config" not in command:
        from toolwire.upstream.local_llama import local_extra_installed

        if not local_extra_installed():
            pytest.skip("the bundled local model needs the `local` extra (`make run` installs it)")
    port = free_port()
    shown = command.replace(f":{servers.toolwire}", f":{port}")
    if shown.startswith("make "):  # make takes the port as a variable, not an option
        shown = re.sub(r"\s*PORT=\d+", "", shown) + f" PORT={port}"
    elif "--port" not in shown:
        shown += f" --port {port}"
    else:
        shown = re.sub(r"--port \d+", f"--port {port}", shown)
    log = servers.scratch / f"serve-{port}.log"
    with open(log, "w+b") as out:
        process = subprocess.Popen(
            ["bash", "-c", exports + shown],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT if shown.startswith(IN_CHECKOUT) else servers.scratch,
            env=_env(),
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            up = False
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    up = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).is_success
                except httpx.TransportError:
                    up = False
                if up:
                    break
                time.sleep(0.1)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 15)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, 9)
                    process.wait()
        out.seek(0)
        assert up, f"{block.name}: `{command}` did not come up:\n{out.read().decode()}"


def _run_config(block: Block, text: str, servers: Servers) -> None:
    data = yaml.safe_load(text)
    assert isinstance(data, dict), f"{block.name}: not a config mapping"
    config = servers.scratch / f"config_{block.path.stem}_{block.line}.yaml"
    config.write_text(text, encoding="utf-8")
    args = ["serve", "--config", str(config), "--port", str(free_port())]
    if "upstream" not in data:
        args += ["--upstream", f"http://127.0.0.1:{servers.model}/v1"]
    if "db" not in data:
        args += ["--db", f"sqlite:///{servers.scratch / f'config-{block.line}.db'}"]
    for name in _env_names(data):  # credentials a config names: the reader's to set
        os.environ.setdefault(name, "docs-test-credential")
    with _serve(args, servers.scratch):
        pass


def _env_names(data: object) -> Iterator[str]:
    """The environment variables a config reads credentials from (`*_env` keys)."""
    if isinstance(data, list):
        for item in data:
            yield from _env_names(item)
    elif isinstance(data, dict):
        for key, value in data.items():
            if str(key).endswith("_env") and isinstance(value, str):
                yield value
            elif str(key).endswith("_env") and isinstance(value, dict):
                yield from (str(v) for v in value.values())
            else:
                yield from _env_names(value)


def test_every_doc_is_checked_and_skips_stay_rare() -> None:
    """The glob sees every doc, and skip markers stay the exception."""
    names = {block.path.name for block in blocks()}
    assert "README.md" in names and "server.md" in names
    skipped = [block for block in ALL if block.skip is not None]
    assert len(skipped) <= len(ALL) // 4, [block.name for block in skipped]
