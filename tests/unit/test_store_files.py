"""The database is toolwire's alone: created 0600 (with its -wal and -shm) in a 0700
directory, and an existing one open to others is warned about. The attack: any local user read
the default database (responses, key hashes, the server secret), created 0644 in 0755."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolwire.store import urls
from toolwire.store.database import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


async def test_default_database_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "home" / ".local" / "share" / "toolwire"
    monkeypatch.setattr(urls, "user_data_dir", lambda *a, **k: str(data))
    store = await Store.open()
    try:
        await store.keys.create("k")  # a write: the -wal and -shm exist now
        files = sorted(p.name for p in data.iterdir())
        assert files == ["toolwire.db", "toolwire.db-shm", "toolwire.db-wal"]
        assert {name: mode(data / name) for name in files} == dict.fromkeys(files, 0o600)
        assert mode(data) == 0o700
    finally:
        await store.close()


async def test_a_database_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "old.db"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    with caplog.at_level(logging.WARNING, logger="toolwire.store"):
        store = await Store.open(f"sqlite:///{db}")
        await store.close()
    assert "readable by other users (mode 0644)" in caplog.text and "chmod 600" in caplog.text
    assert mode(db) == 0o644  # not changed behind the operator's back
