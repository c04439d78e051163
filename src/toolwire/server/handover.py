"""`toolwire serve` hands over to a process that never imported the CLI.

The CLI (typer, click, rich, shellingham, the commands' own modules) reads the flags and checks
the settings; a server that kept them would carry them for its whole life (~4.5 MB of its RSS,
benchmarks/MISSED.md). So, once the settings are valid, the CLI's process replaces itself
(`exec`: the same pid, signals, terminal and environment) with a fresh interpreter that only
loads the settings and runs the server. What the new interpreter needs comes through an
anonymous in-memory file (`memfd`: never on disk, closed once read): the module search path,
`sys.argv`, whether `--debug` was given, and the settings, pickled as `--workers` already hands
them to its processes. Where there is no `memfd_create` (not Linux), the server runs in the
CLI's process, as before.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from toolwire.config import ServerConfig

#: What the new interpreter runs (`python -c`): the search path first, so that `toolwire` is
#: found where the CLI found it; then `serve` below. `{fd}` is the memfd's number. The CLI's
#: arguments follow it on the command line, so `ps` still shows `toolwire serve …`.
BOOT = (
    "import os, pickle, sys; f = os.fdopen({fd}, 'rb'); sys.path[:] = pickle.load(f); "
    "from toolwire.server.handover import serve; serve(f)"
)


def handover(config: ServerConfig, *, debug: bool) -> None:
    """Replace this process with a server process running `config`; returns only where that
    cannot be done (the caller then serves here)."""
    if not hasattr(os, "memfd_create") or not sys.executable or getattr(sys, "frozen", False):
        return  # not Linux, or no interpreter to start (an embedding or frozen program)
    if not _same_interpreter(sys.executable):
        return  # a wrapper or shim: what it would start might not find this toolwire
    fd = os.memfd_create("toolwire-serve", 0)  # no close-on-exec: the new interpreter reads it
    with os.fdopen(os.dup(fd), "wb") as out:
        pickle.dump(sys.path, out)
        pickle.dump((sys.argv, debug, config), out)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    # -X, -W, -O...: passed on as multiprocessing passes them
    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    if "-I" not in flags and "-P" not in flags:
        # `-c` would put the current directory first on the search path, and BOOT imports
        # `pickle` before it restores the CLI's: a `pickle.py` where `serve` was started would
        # run in the server. `-P` leaves the directory off (the CLI's own start never had it).
        flags.append("-P")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, [sys.executable, *flags, "-c", BOOT.format(fd=fd), *sys.argv])
    except OSError:  # the interpreter cannot be started again: serve here
        os.close(fd)


def _same_interpreter(executable: str) -> bool:
    """Whether `executable` is the interpreter running now (not a wrapper that starts another
    Python, whose standard library and compiled modules would not match this search path)."""
    try:
        return os.path.samefile(executable, "/proc/self/exe")
    except OSError:
        return False


def serve(source: IO[bytes]) -> None:
    """The server process: the settings from `source`, then the server, its errors said as the
    CLI says them (`toolwire serve: …`, exit status 2; the traceback with `--debug`)."""
    with source:
        argv, debug, config = pickle.load(source)
    sys.argv = argv
    try:  # the process's name, as `pgrep -x toolwire` and `top` show it (`python3` after exec)
        with open("/proc/self/comm", "w") as comm:
            comm.write("toolwire")
    except OSError:
        pass
    from toolwire.errors import ToolwireError
    from toolwire.server.main import run

    try:
        run(config)
    except ToolwireError as exc:
        print(f"toolwire serve: {exc.message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        if debug:
            raise
        from toolwire.cli_errors import describe

        print(f"toolwire serve: {describe(exc)}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
