"""Shared fixtures: real servers on loopback, started by the tests themselves."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from toolwire.testing import ScriptedUpstream

DATA = Path(__file__).parent / "data"


@pytest.fixture
def scripted() -> Iterator[ScriptedUpstream]:
    """A fresh ScriptedUpstream per test; script it with `.add(...)`."""
    with ScriptedUpstream() as upstream:
        yield upstream
