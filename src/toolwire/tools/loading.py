"""Tools named as `module:object` (CLI flags, config files): a Tool, a function, or a list."""

from __future__ import annotations

import importlib
from typing import Any

from toolwire.errors import ConfigError
from toolwire.tools.base import Tool, tool


def load_tools(specs: list[str]) -> list[Tool]:
    tools: list[Tool] = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"a tool is named module:object, got {spec!r}")
        try:
            obj: Any = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load tool {spec!r}: {exc}") from exc
        for item in obj if isinstance(obj, list | tuple) else [obj]:
            tools.append(item if isinstance(item, Tool) else tool(item))
    return tools
