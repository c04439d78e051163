"""The default rendering of typed tool output: readable text, never a JSON string of escapes.

Strings pass through untouched (a file containing `\\.ts$` reads as `\\.ts$`). Mappings, lists,
dataclasses and pydantic models become indented `key: value` lines, multi-line strings as
indented blocks. Used when a tool has no `render` of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if value is None:
        return ""
    lines: list[str] = []
    _write(_plain(value), 0, lines)
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return value


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _write(value: Any, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    value = _plain(value)
    if isinstance(value, Mapping):
        if not value:
            lines.append(pad + "{}")
        for key, item in value.items():
            item = _plain(item)
            if isinstance(item, Mapping | list | tuple) and item:
                lines.append(f"{pad}{key}:")
                _write(item, indent + 1, lines)
            elif isinstance(item, str) and "\n" in item:
                lines.append(f"{pad}{key}: |")
                lines.extend(pad + "  " + line for line in item.split("\n"))
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
    elif isinstance(value, list | tuple):
        if not value:
            lines.append(pad + "[]")
        for item in value:
            item = _plain(item)
            if isinstance(item, Mapping | list | tuple) and item:
                lines.append(f"{pad}-")
                _write(item, indent + 1, lines)
            elif isinstance(item, str) and "\n" in item:
                lines.append(f"{pad}- |")
                lines.extend(pad + "  " + line for line in item.split("\n"))
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    elif isinstance(value, str) and "\n" in value:
        lines.extend(pad + line for line in value.split("\n"))
    else:
        lines.append(pad + _scalar(value))
