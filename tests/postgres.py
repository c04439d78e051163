"""A throwaway PostgreSQL cluster on loopback, started by the tests (one per session).

Debian's `postgresql` package (installed by `.ci/run` when missing) puts `initdb` and `pg_ctl`
in /usr/lib/postgresql/<version>/bin. PostgreSQL refuses to run as root, so as root (CI) the
cluster runs as the `postgres` user the package creates (or `nobody`), through `runuser`, in
a directory under /tmp it owns; otherwise as the current user. Durability is traded for speed
(fsync off): the tests kill toolwire, never PostgreSQL.
"""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.processes import free_port


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Cluster:
    def __init__(self) -> None:
        binaries = _binaries()
        if binaries is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin = binaries
        self.prefix: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="toolwire-pg-"))
        if os.geteuid() == 0:
            user = "postgres"
            try:
                pwd.getpwnam(user)
            except KeyError:
                user = "nobody"
            entry = pwd.getpwnam(user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self.prefix = ["runuser", "-u", user, "--"]
        self.data = self.root / "data"
        self.port = free_port()

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self.prefix, *args], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def start(self) -> Cluster:
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""

        async def create() -> None:
            import asyncpg

            connection = await asyncpg.connect(
                host="127.0.0.1", port=self.port, user="postgres", database="postgres"
            )
            try:
                await connection.execute(f'CREATE DATABASE "{name}"')
            finally:
                await connection.close()

        asyncio.run(create())
        return self.url(name)
