"""Where `exec` commands run: inside bubblewrap (`bwrap`) when it works here, else unsandboxed.

In the sandbox a command has

- **only what a command needs**: a fresh root holding the system directories (`/usr`, `/bin`,
  `/sbin`, `/lib*`, `/etc`) read-only, the workspace read-write, a private `/tmp` and
  `/dev/shm` (size-limited tmpfs, gone with the command), a minimal `/dev` and its own `/proc`.
  Nothing else is mounted: not the database, not `/home` or `/root`, not `/run` or
  `/var/run` (so no host Unix socket, a Docker socket say), not `/var`;
- **no network**: a network namespace of its own (only loopback; abstract Unix sockets are per
  network namespace too), and its own pid, ipc and uts namespaces, a new session; it dies with
  toolwire;
- **a real unprivileged uid**: when toolwire runs as root, bwrap runs without a user namespace
  (there, a sandbox uid of 65534 would map to host uid 0 and own root's files) and the command
  drops to a real host uid with `setpriv` (no capabilities, empty bounding set, no supplementary
  groups, no_new_privs): the owner of the workspace root when that is not root, else 65534
  (`nobody`, who can then write only where "other" may). When toolwire is not root, bwrap's
  user namespace maps the command to toolwire's own uid;
- **limits** (`prlimit`, inherited by every child): the call's wall-clock timeout (the whole
  sandbox is killed), CPU time of the same seconds per process, data memory (`exec_memory_mb`,
  default 4 GiB: heap and private writable mappings), `/tmp` holding at most `exec_memory_mb`,
  at most `exec_max_processes` processes (default 256, counted per uid), files of at most
  `exec_max_file_mb` (default 1024); output is capped by the `exec` tool itself;
- **a clean environment**: only `PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, `TZ`, `USER`,
  `LOGNAME` are passed (never, for instance, the variable that holds the upstream's key). The
  same environment and limits apply without the sandbox.

Whether bwrap works is probed once per process (it needs user namespaces unless toolwire is
root, and some containers forbid them). With `exec_sandbox: auto` (the default) and no working
bwrap, commands run unsandboxed: toolwire logs a warning at start-up and the `exec` tool's
description says so. With `exec_sandbox: bwrap`, that is a start-up error instead.
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

#: The unprivileged uid/gid commands run as when toolwire runs as root and the workspace
#: belongs to root too.
NOBODY = 65534

_ENV_NAMES = ("PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The host directories a command sees (read-only); a top-level symlink (`/bin` -> `usr/bin`
#: on merged-/usr systems) is recreated as the same symlink.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_SHM_BYTES = 16 * 1024 * 1024

#: The fallback when util-linux's `prlimit` is missing: $1 data KiB, $2 CPU seconds, $3 the
#: command (no process or file-size limit then).
_LIMITS_SCRIPT = (
    'ulimit -d "$1" 2>/dev/null; ulimit -t "$2" 2>/dev/null; shift 2; exec /bin/sh -c "$1"'
)


@dataclass(slots=True, frozen=True)
class Limits:
    """What one command may use: CPU seconds and data memory per process, processes in all,
    the largest file it may write."""

    seconds: float
    memory_mb: int = 4096
    max_processes: int = 256
    max_file_mb: int = 1024


def run_as(root: Path) -> tuple[int, int] | None:
    """The (uid, gid) commands run as when toolwire is root (see the module docstring); None
    when toolwire is not root."""
    if os.geteuid() != 0:
        return None
    try:
        owner = root.stat()
    except OSError:
        return NOBODY, NOBODY
    if owner.st_uid == 0:
        return NOBODY, NOBODY
    return owner.st_uid, owner.st_gid


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
                "sandboxed (bubblewrap): no network, only system directories (read-only) and "
                "the workspace exist, writes only inside the workspace, a private /tmp, limits "
                "on time, memory, processes and file size"
                + (", as an unprivileged user" if os.geteuid() == 0 else "")
            )
        return f"NOT sandboxed ({self.reason}): commands run as toolwire's own user"


def _bwrap_flags(root: Path, cwd: Path, tmp_bytes: int) -> list[str]:
    flags: list[str] = []
    for directory in _SYSTEM_DIRS:
        if os.path.islink(directory):
            flags += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            flags += ["--ro-bind", directory, directory]
    flags += [
        "--dev", "/dev",
        "--perms", "1777", "--size", str(_SHM_BYTES), "--tmpfs", "/dev/shm",
        "--proc", "/proc",
        "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp",
        "--bind", str(root), str(root),
        "--chdir", str(cwd),
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
    ]  # fmt: skip
    if os.geteuid() != 0:
        flags += ["--unshare-user"]  # unprivileged bwrap needs it; maps to our own uid
    else:
        # Only what setpriv needs to become a real unprivileged uid (see below), and what
        # bwrap needs to enter a workspace closed to root-without-capabilities (0700, owned
        # by its user); changing to a non-zero uid then clears even these.
        flags += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
            flags += ["--cap-add", cap]
    return flags


def _drop_privileges(user: tuple[int, int] | None) -> list[str]:
    """As root: the `setpriv` prefix that becomes a real unprivileged host uid."""
    if user is None:
        return []
    uid, gid = user
    return [
        "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
    ]  # fmt: skip


@functools.cache
def _probe(bwrap: str) -> str | None:
    """None if bwrap can run a command here, else why not."""
    probe_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    user = run_as(probe_dir)
    argv = [
        bwrap,
        *_bwrap_flags(probe_dir, probe_dir, 1024 * 1024),
        *_drop_privileges(user),
        "/bin/sh",
        "-c",
        "exit 0",
    ]
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
    if problem is None and os.geteuid() == 0 and shutil.which("setpriv") is None:
        problem = "setpriv (util-linux) is missing, so commands could not drop root"
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
    sandbox: Sandbox, command: str, *, root: Path, cwd: Path, limits: Limits
) -> list[str]:
    """The argv that runs `command` in `cwd`, sandboxed if `sandbox` is, within `limits`."""
    memory = limits.memory_mb * 1024 * 1024
    cpu = str(int(limits.seconds) + 1)
    inner: list[str]
    if shutil.which("prlimit") is not None:
        inner = [
            "prlimit",
            f"--cpu={cpu}",
            f"--data={memory if memory else 'unlimited'}",
            f"--nproc={limits.max_processes or 'unlimited'}",
            f"--fsize={limits.max_file_mb * 1024 * 1024 or 'unlimited'}",
            "--",
            "/bin/sh",
            "-c",
            command,
        ]
    else:
        data = str(memory // 1024) if memory else "unlimited"
        inner = ["/bin/sh", "-c", _LIMITS_SCRIPT, "toolwire-exec", data, cpu, command]
    if sandbox.bwrap is None:
        return inner
    tmp_bytes = memory or 1024 * 1024 * 1024
    return [
        sandbox.bwrap,
        *_bwrap_flags(root, cwd, tmp_bytes),
        *_drop_privileges(run_as(root)),
        *inner,
    ]
