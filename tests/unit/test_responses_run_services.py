"""The run services a `Preparer` hands each run (`prepare/preparer.py` `_services`): one frozen
object per key, bound to that key, and never more kept than the bound."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from toolwire.loop.state import LoopSettings
from toolwire.server.responses.prepare import preparer
from toolwire.server.responses.prepare.preparer import Preparer


def _preparer() -> Preparer:
    signer: Any = SimpleNamespace(issue=lambda owner, *args: f"{owner}:{args}")
    compaction: Any = SimpleNamespace(seal=lambda context, owner=None: f"{owner}:{context}")
    return Preparer(
        store=object(),  # type: ignore[arg-type]
        signer=signer,
        compaction=compaction,
        default_model=None,
        server_tools=[],
        loop_settings=LoopSettings(),
        mcp_servers=None,
        mcp_pool=object(),  # type: ignore[arg-type]
        mcp_call_timeout=1.0,
        web_search=None,
    )


def test_each_key_gets_services_bound_to_it() -> None:
    prepared = _preparer()
    mine, theirs = prepared._services("key_a"), prepared._services("key_b")
    assert prepared._services("key_a") is mine
    assert mine.approval_ids is not None and mine.seal is not None
    assert theirs.approval_ids is not None
    assert mine.approval_ids("s", "t", "{}") == "key_a:('s', 't', '{}')"
    assert theirs.approval_ids("s", "t", "{}") == "key_b:('s', 't', '{}')"
    assert mine.seal("c") == "key_a:c"  # type: ignore[arg-type]
    assert prepared._services(None).approval_ids("s", "t", "{}") == "None:('s', 't', '{}')"  # type: ignore[misc]


def test_the_services_kept_are_bounded() -> None:
    prepared = _preparer()
    for n in range(3 * preparer._SERVICES_KEPT):
        prepared._services(f"key_{n}")
        assert len(prepared._services_by_owner) <= preparer._SERVICES_KEPT
