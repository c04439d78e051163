"""The sandbox attacks again, with toolwire running as an unprivileged user.

Most CI (and many containers) run toolwire as root, where the sandbox drops to a real uid with
setpriv; run as anyone else, bwrap takes the other path (an unprivileged user namespace). This
runs the exec attack tests and the directory-flip race as uid 65534, in a child pytest, with the
system's own Python (the project's interpreter may sit under a home nobody can enter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolwire.tools.workspace import sandbox as sandbox_module

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
SITE = next(iter(Path(p) for p in sys.path if p.endswith("site-packages")), None)
#: bwrap as this (root) process finds it: without it there is nothing to attack, so the test
#: skips, saying why (`make test` on a machine without bubblewrap; `.ci/run` installs it).
SANDBOX = sandbox_module.detect("auto")


def _system_python_matches() -> bool:
    if not SYSTEM_PYTHON.exists():
        return False
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return version == str(tuple(sys.version_info[:2]))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an unprivileged user")
@pytest.mark.skipif(not SANDBOX.active, reason=f"bwrap cannot run here: {SANDBOX.reason}")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
@pytest.mark.skipif(
    not _system_python_matches() or SITE is None,
    reason="/usr/bin/python3 is not the same Python version as this one",
)
def test_sandbox_attacks_fail_when_toolwire_is_unprivileged() -> None:
    # Not pytest's tmp_path: its parents are 0700, closed to the unprivileged user.
    with tempfile.TemporaryDirectory(prefix="toolwire-unprivileged-") as name:
        tmp_path = Path(name)
        os.chmod(tmp_path, 0o777)
        result = _run_as_nobody(tmp_path)
    tail = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in result.stdout and "bwrap cannot run" not in result.stdout, tail


def _run_as_nobody(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        # the same PATH as this process: a bwrap hidden from it is hidden from the child too
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": f"{REPO / 'src'}:{REPO}:{SITE}",
    }
    return subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            str(SYSTEM_PYTHON),
            "-m",
            "pytest",
            "-rs",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}",
            "-o",
            "addopts=",
            str(REPO / "tests/unit/test_workspace_sandbox.py"),
            str(REPO / "tests/unit/test_workspace_race.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
