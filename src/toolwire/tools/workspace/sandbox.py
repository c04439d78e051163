"""Where `exec` commands run: inside bubblewrap (`bwrap`) when it works here, else unsandboxed.

In the sandbox a command has

- **no network**: a network namespace of its own, with only a loopback device;
- **writes only in the workspace**: `/` is bound read-only, the workspace root read-write,
  `/tmp` is a private tmpfs (gone with the command), `/dev` and `/proc` are minimal and its own;
- **its own pid, ipc, uts and user namespaces**, a new session, and it dies with toolwire;
- **no root**: when toolwire runs as root, the command runs as uid/gid 65534 (nobody) in a user
  namespace, with no capabilities;
- **limits**: the call's wall-clock timeout (the whole sandbox is killed), a CPU-time limit of
  the same seconds, and a data-memory limit (`ulimit -d`, `exec_memory_mb`, default 4 GiB: heap
  and private writable mappings, not mere address-space reservations);
- **a clean environment**: only `PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, `TZ`, `USER`,
  `LOGNAME` are passed (never, for instance, the variable that holds the upstream's key). The
  same environment and limits apply without the sandbox.

Whether bwrap works is probed once per process (it needs user namespaces, which some containers
forbid). With `exec_sandbox: auto` (the default) and no working bwrap, commands run unsandboxed:
toolwire logs a warning at start-up and the `exec` tool's description says so. With
`exec_sandbox: bwrap`, that is a start-up error instead.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolwire.tools.workspace.errors import WorkspaceError

log = logging.getLogger("toolwire.workspace")

SandboxMode = Literal["auto", "bwrap", "none"]

#: The unprivileged uid/gid commands run as when toolwire itself runs as root.
NOBODY = 65534

_ENV_NAMES = ("PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

#: Sets the limits, then runs the command: $1 data KiB, $2 CPU seconds, $3 the command.
_LIMITS_SCRIPT = (
    'ulimit -d "$1" 2>/dev/null; ulimit -t "$2" 2>/dev/null; shift 2; exec /bin/sh -c "$1"'
)


@dataclass(slots=True, frozen=True)
class Sandbox:
    """How commands run: `bwrap` (the path of a working bwrap) or None, and why not."""

    bwrap: str | None
    reason: str = ""

    @property
    def active(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        if self.bwrap is not None:
            return (
                "sandboxed (bubblewrap): no network, writes only inside the workspace, "
                "a private /tmp" + (", as an unprivileged user" if os.geteuid() == 0 else "")
            )
        return f"NOT sandboxed ({self.reason}): commands run as toolwire's own user"


def _bwrap_flags(root: Path, cwd: Path) -> list[str]:
    flags = [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--bind", str(root), str(root),
        "--chdir", str(cwd),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
    ]  # fmt: skip
    if os.geteuid() == 0:
        flags += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    return flags


@functools.cache
def _probe(bwrap: str) -> str | None:
    """None if bwrap can run a command here, else why not."""
    probe_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    argv = [bwrap, *_bwrap_flags(probe_dir, probe_dir), "/bin/sh", "-c", "exit 0"]
    try:
        result = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if result.returncode != 0:
        detail = result.stderr.decode("utf-8", "replace").strip().splitlines()
        return "bwrap cannot create its namespaces here" + (f": {detail[-1]}" if detail else "")
    return None


def detect(mode: SandboxMode = "auto") -> Sandbox:
    """The sandbox to use; `mode="bwrap"` raises WorkspaceError when bwrap cannot run."""
    if mode == "none":
        return Sandbox(None, "exec_sandbox is none")
    bwrap = shutil.which("bwrap")
    problem = "bubblewrap (bwrap) is not installed" if bwrap is None else _probe(bwrap)
    if problem is None:
        return Sandbox(bwrap)
    if mode == "bwrap":
        raise WorkspaceError(f"exec_sandbox is bwrap, but {problem}")
    return Sandbox(None, problem)


def warn_if_unsandboxed(sandbox: Sandbox) -> None:
    if not sandbox.active:
        log.warning(
            "exec is NOT sandboxed (%s): commands the model runs can use the network and write "
            "anywhere toolwire's user can. Install bubblewrap (apt-get install bubblewrap) "
            "where user namespaces are allowed; see docs/security.md",
            sandbox.reason,
        )


def command_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in _ENV_NAMES if name in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("LC_")})
    env.setdefault("PATH", _DEFAULT_PATH)
    return env


def command_argv(
    sandbox: Sandbox,
    command: str,
    *,
    root: Path,
    cwd: Path,
    seconds: float,
    memory_mb: int,
) -> list[str]:
    """The argv that runs `command` in `cwd`, sandboxed if `sandbox` is, within the limits."""
    memory = str(memory_mb * 1024) if memory_mb > 0 else "unlimited"
    cpu = str(int(seconds) + 1)
    inner = ["/bin/sh", "-c", _LIMITS_SCRIPT, "toolwire-exec", memory, cpu, command]
    if sandbox.bwrap is None:
        return inner
    return [sandbox.bwrap, *_bwrap_flags(root, cwd), *inner]
