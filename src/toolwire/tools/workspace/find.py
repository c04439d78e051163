"""`find`: files matching a glob, as newline-separated root-relative paths, sorted.

Sees the files `ignore.IgnoreRules.walk` sees (`.gitignore` honoured, `.git/` skipped). In a
pipe it filters the previous step's files (a `find`'s list, or the files a `grep` matched)
instead of walking the tree.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.globs import Glob
from toolwire.tools.workspace.ignore import IgnoreRules, path_key
from toolwire.tools.workspace.outputs import FileList, GrepResult
from toolwire.tools.workspace.rendering import render_find
from toolwire.tools.workspace.workspace import Workspace


class FindArguments(StrictArguments):
    pattern: str = Field(
        description=(
            "Glob. Without '/', it matches file names at any depth ('*.py', "
            "'test_*.{py,pyi}'); with '/', the path relative to `path` ('src/**/*.ts'). "
            "'**' spans directories."
        )
    )
    path: str = Field(".", description="Directory to search, relative to the workspace root.")


class Find(WorkspaceTool):
    name = "find"
    description = (
        "Find files by glob. Output: one root-relative path per line, sorted. Honours "
        ".gitignore and skips .git/."
    )
    Arguments = FindArguments
    accepts = (FileList, GrepResult)

    async def call(self, arguments: BaseModel, upstream: Any) -> FileList:
        args = coerce(arguments, FindArguments)
        return await asyncio.to_thread(
            find_files, self.workspace, args.pattern, args.path, upstream
        )

    def render(self, output: Any) -> str:
        return render_find(output)


def find_files(
    workspace: Workspace, pattern: str, path: str, upstream: FileList | GrepResult | None = None
) -> FileList:
    """The files under `path` matching `pattern`; from `upstream`'s files when given."""
    glob = Glob(pattern)
    base = workspace.resolve_dir(path)
    base_display = workspace.display(base)
    prefix = "" if base_display == "." else base_display + "/"
    if upstream is None:
        candidates = IgnoreRules(workspace.root).walk(prefix.rstrip("/"))
    else:
        paths = upstream.paths if isinstance(upstream, FileList) else upstream.files
        candidates = iter(sorted(paths, key=path_key))
    found = [
        relative
        for relative in candidates
        if relative.startswith(prefix) and glob.matches(relative[len(prefix) :])
    ]
    cap = workspace.max_find_results
    return FileList(pattern, base_display, found[:cap], len(found))
