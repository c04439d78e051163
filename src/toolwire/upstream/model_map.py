"""Which upstream model a door sends a request to, from the name its client asked for.

Claude Code asks for `claude-*` names and Gemini CLI for `gemini-*` ones, which no open model
server serves: each door maps them by the same rule, with its own families (Anthropic's tiers
`opus`, `sonnet`, `haiku`; Gemini's `pro`, `flash`, `flash-lite`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def map_model(
    requested: str, models: Mapping[str, str], families: Sequence[str], default: str | None
) -> str:
    """The exact name's mapping, else the first of `families` the name contains (in the order
    given: `flash-lite` before `flash`) that is mapped, else the mapping of `default`, else
    the server's default model (`default`), else the name as asked."""
    if requested in models:
        return models[requested]
    lowered = requested.lower()
    for family in families:
        if family in lowered and family in models:
            return models[family]
    return models.get("default") or default or requested
