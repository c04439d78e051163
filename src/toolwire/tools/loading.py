"""Tools named as `module:object` (CLI flags, config files): a Tool, a function, or a list."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from toolwire.errors import ConfigError
from toolwire.tools.base import Tool, tool


def load_tools(specs: list[str]) -> list[Tool]:
    """The tools `specs` name. Modules are found in the current directory too, as `python -m`
    would: an installed `toolwire` script does not put it on `sys.path`, and `--tool
    mytools:ALL` next to `mytools.py` is what a user writes first."""
    tools: list[Tool] = []
    for spec in specs:
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"a tool is named module:object, got {spec!r}")
        _current_directory_importable()
        try:
            obj: Any = getattr(importlib.import_module(module_name), attr)
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"cannot load tool {spec!r}: {exc} (looked in the current directory and on "
                "PYTHONPATH: run from the module's directory, or set PYTHONPATH=DIR)"
            ) from exc
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load tool {spec!r}: {exc}") from exc
        for item in obj if isinstance(obj, list | tuple) else [obj]:
            tools.append(item if isinstance(item, Tool) else tool(item))
    return tools


def _current_directory_importable() -> None:
    """Append the current directory to `sys.path` (last: it never shadows an installed
    module) unless it is there already, as `""` or by name."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)
