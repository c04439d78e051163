"""The chat door's sampling (`server/chat/proxy.py` `_sampling`): the body's fields and its
unhandled ones passed on as before; a body that sets none shares the default."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.server.chat.proxy import _DEFAULT_SAMPLING, _HANDLED, _sampling
from toolwire.upstream.base import Sampling


def _before(body: dict[str, Any], max_tokens: Any) -> Sampling:
    return Sampling(
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        max_output_tokens=max_tokens,
        response_format=body.get("response_format"),
        extra_body={k: v for k, v in body.items() if k not in _HANDLED} or None,
    )


@pytest.mark.parametrize(
    ("body", "max_tokens"),
    [
        ({"model": "m", "messages": []}, None),
        ({"model": "m", "messages": [], "temperature": 0}, None),
        ({"model": "m", "messages": [], "top_p": 0.5, "seed": 7, "stop": ["x"]}, 9),
        ({"model": "m", "response_format": {"type": "json_object"}}, None),
        ({"model": "m", "top_k": 3}, None),
    ],
)
def test_sampling_reads_as_before(body: dict[str, Any], max_tokens: Any) -> None:
    got = _sampling(body, max_tokens)
    assert got == _before(body, max_tokens)
    if got.extra_body is not None:
        assert list(got.extra_body) == [k for k in body if k not in _HANDLED]


def test_a_body_without_sampling_shares_the_default() -> None:
    assert _sampling({"model": "m", "messages": [], "stream": False}, None) is _DEFAULT_SAMPLING
