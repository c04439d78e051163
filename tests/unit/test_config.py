"""Settings: defaults < file (YAML or TOML) < environment < flags, with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolwire.config import load_config
from toolwire.errors import ConfigError


def test_precedence_file_env_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "toolwire.toml"
    config.write_text(
        'upstream = "http://file/v1"\nmodel = "from-file"\nport = 9000\ntools = ["a:b"]\n'
    )
    monkeypatch.setenv("TOOLWIRE_MODEL", "from-env")
    monkeypatch.setenv("TOOLWIRE_PORT", "9100")
    settings = load_config(config, {"port": 9200, "upstream": None, "tools": []})
    assert settings.upstream == "http://file/v1"  # a flag left unset does not override
    assert settings.model == "from-env"
    assert settings.port == 9200
    assert settings.tools == ["a:b"]


def test_yaml_file_with_mcp_servers_and_workspace(tmp_path: Path) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text(
        "mcp_servers:\n  - label: time\n    command: python\n    default: true\n"
        "workspace:\n  root: /srv/repo\n  allow_write: true\n"
    )
    settings = load_config(config, {})
    assert settings.mcp_servers[0].label == "time" and settings.mcp_servers[0].default
    assert settings.workspace is not None and settings.workspace.allow_write


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port = 'many'\n", "invalid setting port"),
        ("unknown_key = 1\n", "invalid setting unknown_key"),
        ("[[mcp_servers]]\nlabel = 'x'\n", "exactly one of url and command"),
        ("not toml at all = = =\n", "is not valid"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "toolwire.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(config, {})
    assert message in info.value.message


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml", {})
    assert "nope.yaml" in info.value.message


def test_anthropic_model_mapping_from_file_env_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "toolwire.yaml"
    config.write_text("anthropic_models:\n  haiku: small\ncontext_window: 32768\n")
    assert load_config(config, {}).anthropic_models == {"haiku": "small"}
    assert load_config(config, {}).context_window == 32768
    monkeypatch.setenv("TOOLWIRE_ANTHROPIC_MODELS", "haiku=small, default=big")
    assert load_config(None, {}).anthropic_models == {"haiku": "small", "default": "big"}
    flags = {"anthropic_models": ["claude-opus-4-1=big"]}
    assert load_config(None, flags).anthropic_models == {"claude-opus-4-1": "big"}
    with pytest.raises(ConfigError, match="NAME=MODEL"):
        load_config(None, {"anthropic_models": ["sonnet"]})
