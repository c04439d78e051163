"""`exec`: run a shell command in the workspace, bounded in time and output.

The command runs with `/bin/sh -c` in its own process group, stdin closed, inside bubblewrap
where it works (`sandbox.py`: no network, writes only inside the workspace, limits, a clean
environment); on timeout (or when the call is cancelled) the whole group is killed, so children
do not outlive it. Each
of stdout and stderr keeps at most `max_output_chars` bytes: the head and the tail, the middle
replaced by a marker. Registered only when the workspace allows exec, and by default every
call needs a human's approval.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.outputs import ExecResult
from toolwire.tools.workspace.rendering import render_exec
from toolwire.tools.workspace.sandbox import Limits, command_argv, command_env
from toolwire.tools.workspace.workspace import Workspace

#: How long pipes may stay open after the command exits (a background child holding them)
#: before the rest of its process group is killed.
_DRAIN_GRACE = 2.0
_READ_CHUNK = 65536


class ExecArguments(StrictArguments):
    command: str = Field(description="Shell command line, run with /bin/sh -c.")
    cwd: str = Field(".", description="Working directory, relative to the workspace root.")
    timeout: float = Field(30, gt=0, description="Seconds before the command is killed.")
    max_output_chars: int | None = Field(
        None, ge=200, le=1_000_000, description="Cap on each of stdout and stderr."
    )


class Capture:
    """Bounded capture of one stream: the first half of the cap and the last half."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_cap + self.tail_cap

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        cut = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[… {cut} bytes cut from the middle …]\n{tail}"


class Exec(WorkspaceTool):
    name = "exec"
    description = (
        "Run a shell command (/bin/sh -c) in the workspace. Output: exitCode, timedOut, "
        "stdoutTruncated, stderrTruncated, then stdout and stderr. Long output keeps its head "
        "and tail."
    )
    Arguments = ExecArguments
    read_only = False

    def __init__(
        self,
        workspace: Workspace,
        *,
        needs_approval: bool | Callable[[dict[str, object]], bool] = True,
    ) -> None:
        super().__init__(workspace)
        self.needs_approval = needs_approval
        if workspace.allow_exec:
            self.description = (
                f"{type(self).description} Commands run {workspace.sandbox.describe()}."
            )
        # The executor's own deadline must not fire before the command's.
        self.timeout = workspace.max_exec_timeout + 30

    async def call(self, arguments: BaseModel, upstream: Any) -> ExecResult:
        args = coerce(arguments, ExecArguments)
        if not self.workspace.allow_exec:
            raise WorkspaceError("exec is not allowed in this workspace")
        if args.timeout > self.workspace.max_exec_timeout:
            raise WorkspaceError(
                f"timeout {args.timeout:g}s is over this workspace's limit of "
                f"{self.workspace.max_exec_timeout:g}s"
            )
        cwd = self.workspace.resolve_dir(args.cwd)
        cap = args.max_output_chars or self.workspace.max_output_chars
        limits = Limits(
            args.timeout,
            self.workspace.exec_memory_mb,
            self.workspace.exec_max_processes,
            self.workspace.exec_max_file_mb,
        )
        argv = command_argv(
            self.workspace.sandbox, args.command, root=self.workspace.root, cwd=cwd, limits=limits
        )
        return await run_command(
            args.command, cwd, self.workspace.display(cwd), seconds=args.timeout, cap=cap, argv=argv
        )

    def render(self, output: Any) -> str:
        return render_exec(output)


async def run_command(
    command: str,
    cwd: os.PathLike[str] | str,
    display: str,
    *,
    seconds: float,
    cap: int,
    argv: list[str] | None = None,
) -> ExecResult:
    """Run `command` (or `argv`, which runs it: a sandbox and limits) and capture it; see the
    module docstring for the rules."""
    process = await asyncio.create_subprocess_exec(
        *(argv or ["/bin/sh", "-c", command]),
        cwd=cwd,
        env=command_env(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stderr is not None
    out, err = Capture(cap), Capture(cap)
    readers = asyncio.gather(_pump(process.stdout, out), _pump(process.stderr, err))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(process.wait(), seconds)
        except TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            await process.wait()
        try:
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_GRACE)
        except TimeoutError:
            _kill_group(process.pid)
            try:
                await asyncio.wait_for(asyncio.shield(readers), _DRAIN_GRACE)
            except TimeoutError:
                readers.cancel()
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
        if not readers.done():
            readers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await readers
    return ExecResult(
        command,
        display,
        process.returncode,
        out.text(),
        err.text(),
        timed_out,
        out.truncated,
        err.truncated,
    )


async def _pump(stream: asyncio.StreamReader, capture: Capture) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        capture.feed(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
