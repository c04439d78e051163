"""The workspace's tool set: what a model gets for one `Workspace`."""

from __future__ import annotations

from collections.abc import Callable

from toolwire.tools.base import Tool
from toolwire.tools.workspace.common import WorkspaceTool
from toolwire.tools.workspace.edit import CreateFile, EditFile, PreviewEdit
from toolwire.tools.workspace.find import Find
from toolwire.tools.workspace.grep import Grep, SearchFiles
from toolwire.tools.workspace.pipe import Pipe
from toolwire.tools.workspace.read import ReadFile
from toolwire.tools.workspace.shell import Exec
from toolwire.tools.workspace.workspace import Workspace


def workspace_tools(
    workspace: Workspace,
    *,
    exec_needs_approval: bool | Callable[[dict[str, object]], bool] = True,
) -> list[Tool]:
    """read_file, find, grep, search_files, pipe and preview_edit always; edit_file and
    create_file when `allow_write`; exec (approval required by default) when `allow_exec`."""
    readers: list[WorkspaceTool] = [
        ReadFile(workspace),
        Find(workspace),
        Grep(workspace),
        SearchFiles(workspace),
    ]
    tools: list[WorkspaceTool] = [*readers, Pipe(workspace, readers), PreviewEdit(workspace)]
    if workspace.allow_write:
        tools += [EditFile(workspace), CreateFile(workspace)]
    if workspace.allow_exec:
        tools.append(Exec(workspace, needs_approval=exec_needs_approval))
    return list(tools)
