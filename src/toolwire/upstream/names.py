"""Cleaning tool names as models and servers mangle them, and matching them to declared tools."""

from __future__ import annotations

from collections.abc import Iterable

_STRAY = " \t\r\n:;,.()\"'`"


def clean_tool_name(name: str) -> str:
    """`' get_weather: '` -> `'get_weather'`; `'functions.get_weather'` -> `'get_weather'`."""
    cleaned = name.strip().strip(_STRAY)
    if cleaned.startswith("functions."):
        cleaned = cleaned[len("functions.") :]
    return cleaned


class ToolNameMatcher:
    """Maps a cleaned name to a declared tool: exact, then case-insensitively if unambiguous."""

    __slots__ = ("_exact", "_folded", "as_declared")

    def __init__(self, declared: Iterable[str] | None) -> None:
        self._exact: frozenset[str] | None = None if declared is None else frozenset(declared)
        folded: dict[str, str | None] = {}
        for name in self._exact or ():
            key = name.casefold()
            folded[key] = None if key in folded else name
        self._folded = folded
        self.as_declared = frozenset(n for n in self._exact or () if clean_tool_name(n) == n)
        """The declared names `match` gives back as they are: a name written so needs no
        cleaning, nor matching (the assembler's fast paths)."""

    @property
    def declared(self) -> frozenset[str] | None:
        return self._exact

    def match(self, name: str) -> str | None:
        """The declared tool `name` means, or None. With nothing declared, any non-empty name."""
        cleaned = clean_tool_name(name)
        if self._exact is None:
            return cleaned or None
        if cleaned in self._exact:
            return cleaned
        return self._folded.get(cleaned.casefold())
