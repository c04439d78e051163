"""Glob patterns as `find`, `grep(glob=...)` and `search_files` understand them.

One matcher for every tool so a pattern means the same thing everywhere:
- a pattern without `/` matches the file name at any depth (`*.py`, `test_*.{py,pyi}`);
- a pattern with `/` matches the whole path relative to the search directory
  (`src/*.py`, `**/tests/*.py`); a leading `/` or `./` is dropped, a trailing `/` means
  everything below (`docs/` is `docs/**`);
- `*` and `?` stay within one path segment, `**` spans segments, `[abc]`/`[!abc]` are
  classes, `{a,b}` are alternatives, `\\` escapes; dotfiles are not special.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toolwire.tools.workspace.errors import WorkspaceError


def glob_to_regex(pattern: str) -> str:
    """Translate a glob into a regular expression for `re.fullmatch`."""
    out: list[str] = []
    depth = 0
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                end = i + 2
                whole_segment = (i == 0 or pattern[i - 1] == "/") and (
                    end == n or pattern[end] == "/"
                )
                if whole_segment and end == n:
                    out.append(".*")
                    i = end
                    continue
                if whole_segment:
                    out.append("(?:[^/]*/)*")
                    i = end + 1
                    continue
                out.append("[^/]*")
                i = end
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            close = _class_end(pattern, i)
            if close < 0:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : close]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                escaped = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"[{'^/' if negate else ''}{escaped}]")
                i = close
        elif char == "{":
            out.append("(?:")
            depth += 1
        elif char == "," and depth:
            out.append("|")
        elif char == "}" and depth:
            out.append(")")
            depth -= 1
        elif char == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    if depth:
        raise WorkspaceError(
            f"glob {pattern!r} has an unclosed '{{'; close it or escape it as \\{{"
        )
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """Index of the `]` closing the class opened at `start`, or -1 when there is none."""
    i = start + 1
    if i < len(pattern) and pattern[i] in "!^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "]":
            return i
        i += 1
    return -1


@dataclass(slots=True, frozen=True)
class Glob:
    """A compiled glob; `matches` takes a path relative to the search directory."""

    pattern: str
    basename_only: bool = field(init=False)
    regex: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        text = self.pattern.strip()
        while text.startswith("./"):
            text = text[2:]
        text = text.lstrip("/")
        if text.endswith("/"):
            text += "**"
        if not text:
            raise WorkspaceError(
                f"glob {self.pattern!r} is empty; use '**' for every file or e.g. '*.py'"
            )
        object.__setattr__(self, "basename_only", "/" not in text)
        try:
            object.__setattr__(self, "regex", re.compile(glob_to_regex(text)))
        except re.error as exc:
            raise WorkspaceError(f"glob {self.pattern!r} is not valid: {exc}") from None

    def matches(self, relative: str) -> bool:
        target = relative.rsplit("/", 1)[-1] if self.basename_only else relative
        return self.regex.fullmatch(target) is not None
