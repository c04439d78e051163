"""`grep` and `search_files`: regex search, output as `path:line:text` lines (context lines
as `path-line-text`, `--` between separate groups), like ripgrep prints them.

Which backend runs (ripgrep or pure Python, see `search`) never changes the text. In a pipe,
`grep` searches only the previous step's files: a `find` list, or the files a `grep` matched
(`grep A | grep B` finds B in the files containing A, like `rg -l A | xargs rg B`).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field

from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.globs import Glob
from toolwire.tools.workspace.ignore import IgnoreRules, path_key
from toolwire.tools.workspace.outputs import FileList, GrepLine, GrepResult
from toolwire.tools.workspace.read import cut_line
from toolwire.tools.workspace.rendering import render_grep
from toolwire.tools.workspace.search import Collector, Query, python_search, ripgrep_search
from toolwire.tools.workspace.workspace import Workspace

_PATTERN = "Regular expression matched against each line (ripgrep syntax)."
_PATH = "File or directory to search, relative to the workspace root."
_CONTEXT = "Lines of context to show before and after each match."


class GrepArguments(StrictArguments):
    pattern: str = Field(description=_PATTERN)
    path: str = Field(".", description=_PATH)
    glob: str | None = Field(
        None,
        description="Only search files matching this glob ('*.py'; with '/', relative to path).",
    )
    context: int = Field(0, ge=0, le=50, description=_CONTEXT)
    ignore_case: bool = Field(False, description="Match case-insensitively.")
    fixed_strings: bool = Field(False, description="Treat the pattern as literal text.")
    max_matches: int = Field(200, ge=1, le=10_000, description="Stop after this many matches.")


class SearchFilesArguments(StrictArguments):
    pattern: str = Field(description=_PATTERN)
    glob: str = Field(description="Which files to search: '*.py', 'src/**/*.{ts,tsx}'.")
    path: str = Field(".", description=_PATH)
    context: int = Field(0, ge=0, le=50, description=_CONTEXT)
    ignore_case: bool = Field(False, description="Match case-insensitively.")
    fixed_strings: bool = Field(False, description="Treat the pattern as literal text.")
    max_matches: int = Field(200, ge=1, le=10_000, description="Stop after this many matches.")


class Grep(WorkspaceTool):
    name = "grep"
    description = (
        "Search file contents with a regular expression. Output: `path:line:text` per "
        "matching line (context lines `path-line-text`, `--` between groups), paths "
        "relative to the workspace root. Honours .gitignore, skips .git/ and binary files."
    )
    Arguments: type[BaseModel] = GrepArguments
    accepts = (FileList, GrepResult)

    async def call(self, arguments: BaseModel, upstream: Any) -> GrepResult:
        args = coerce(arguments, GrepArguments)
        return await grep(self.workspace, args, upstream)

    def render(self, output: Any) -> str:
        return render_grep(output)


class SearchFiles(Grep):
    name = "search_files"
    description = (
        "Search the contents of the files matching a glob with a regular expression; the same "
        "output as grep (`path:line:text`)."
    )
    Arguments = SearchFilesArguments

    async def call(self, arguments: BaseModel, upstream: Any) -> GrepResult:
        args = coerce(arguments, SearchFilesArguments)
        return await grep(self.workspace, GrepArguments(**args.model_dump()), upstream)


async def grep(
    workspace: Workspace, args: GrepArguments, upstream: FileList | GrepResult | None = None
) -> GrepResult:
    """Run one search; `upstream` restricts it to that step's files."""
    if "\n" in args.pattern or "\r" in args.pattern:
        raise WorkspaceError(
            "the pattern contains a line break, but grep matches one line at a time; "
            "search for one line of the text"
        )
    query = Query(
        args.pattern, args.ignore_case, args.fixed_strings, args.context, args.max_matches
    )
    files = await asyncio.to_thread(_targets, workspace, args.path, args.glob, upstream)
    if workspace.rg_path is not None:
        collector = await ripgrep_search(workspace.rg_path, workspace.root, query, files)
        backend = "ripgrep"
    else:
        walked = files if files is not None else IgnoreRules(workspace.root).walk("")
        collector = await asyncio.to_thread(python_search, workspace.root, query, walked)
        backend = "python"
    return _shape(workspace, args.pattern, collector, backend)


def _targets(
    workspace: Workspace, path: str, glob: str | None, upstream: FileList | GrepResult | None
) -> list[str] | None:
    """The files to search, root-relative and in `path_key` order; None means the whole
    root, walked by the backend itself."""
    base = workspace.resolve(path)
    if not base.exists():
        raise WorkspaceError(f"no such file or directory: {path}")
    display = workspace.display(base)
    matcher = Glob(glob) if glob is not None else None
    if base.is_file() and upstream is None:
        return [display]
    if not base.is_dir():
        raise WorkspaceError(f"{path} is not a regular file or directory")
    if upstream is None and matcher is None and display == ".":
        return None
    prefix = "" if display == "." else display + "/"
    if upstream is None:
        candidates: list[str] = list(IgnoreRules(workspace.root).walk(prefix.rstrip("/")))
    else:
        paths = upstream.paths if isinstance(upstream, FileList) else upstream.files
        candidates = sorted(paths, key=path_key)
    return [
        relative
        for relative in candidates
        if relative.startswith(prefix)
        and (matcher is None or matcher.matches(relative[len(prefix) :]))
    ]


def _shape(workspace: Workspace, pattern: str, found: Collector, backend: str) -> GrepResult:
    """Lines cut to `max_line_chars`, and no more of them than fit `max_output_chars`."""
    budget = workspace.max_output_chars - 200
    lines: list[GrepLine] = []
    used = 0
    truncated = found.truncated
    for line in found.lines:
        shown = replace(line, text=cut_line(line.text, workspace.max_line_chars))
        cost = len(shown.path) + len(shown.text) + 16
        if lines and used + cost > budget:
            truncated = True
            break
        lines.append(shown)
        used += cost
    matches = sum(1 for line in lines if line.is_match)
    return GrepResult(
        pattern,
        found.query.context,
        lines,
        matches,
        truncated,
        "ripgrep" if backend == "ripgrep" else "python",
        found.query.max_matches,
    )
