"""File and search tools over one directory (`Workspace`), and an MCP server exposing them.

`workspace_tools(Workspace(root, allow_write=..., allow_exec=...))` gives the tool set; see
docs/workspace.md for the tools, their rendered shapes, the safety rules and the pipe rules.
"""

from toolwire.tools.workspace.edit import CreateFile, EditFile, PreviewEdit
from toolwire.tools.workspace.errors import EditConflictError, WorkspaceError
from toolwire.tools.workspace.find import Find
from toolwire.tools.workspace.grep import Grep, SearchFiles
from toolwire.tools.workspace.outputs import (
    CreateResult,
    EditResult,
    ExecResult,
    FileList,
    FileView,
    GrepLine,
    GrepResult,
    LineWindow,
    PatchPreview,
    ReadResult,
)
from toolwire.tools.workspace.pipe import Pipe, PipeOutput
from toolwire.tools.workspace.read import ReadFile
from toolwire.tools.workspace.shell import Exec
from toolwire.tools.workspace.toolset import workspace_tools
from toolwire.tools.workspace.workspace import Workspace, find_ripgrep

__all__ = [
    "CreateFile",
    "CreateResult",
    "EditConflictError",
    "EditFile",
    "EditResult",
    "Exec",
    "ExecResult",
    "FileList",
    "FileView",
    "Find",
    "Grep",
    "GrepLine",
    "GrepResult",
    "LineWindow",
    "PatchPreview",
    "Pipe",
    "PipeOutput",
    "PreviewEdit",
    "ReadFile",
    "ReadResult",
    "SearchFiles",
    "Workspace",
    "WorkspaceError",
    "find_ripgrep",
    "workspace_tools",
]
