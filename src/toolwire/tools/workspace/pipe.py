"""`pipe`: run read-only tools in a chain, passing TYPED output from step to step, and render
only the last step's output (seed 002: structure inside the pipe, plain text at the end).

Rules:
- a step is `{"tool": name, "args": {...}}`; the tools are `find`, `grep`, `search_files` and
  `read_file` (writers and `exec` never run in a pipe: their effects and approvals stay
  visible one call at a time);
- step 1 runs as a plain call; every later step receives the previous step's typed output:
  - `find` output (a file list) restricts `grep`/`search_files` to those files, makes
    `read_file` read each of them (`offset`/`limit` per file), and `find` filter them again;
  - `grep`/`search_files` output passes on the files it matched: `grep` searches only those,
    `find` filters them, and `read_file` shows each with its matches in context (at least 5
    lines around each match, more if the grep had more context; `limit` lines per file);
  - `read_file` output cannot feed a later step;
- a later step's `path` (default `.`) further restricts the files to that directory; a
  `read_file` step needs no `path`;
- a step that produces nothing (no files, no matches) ends the pipe: its own output is shown,
  with a line saying which step came up empty;
- an error in any step ends the pipe with that error, naming the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from toolwire.tools.base import ToolArgumentsError
from toolwire.tools.workspace.common import StrictArguments, WorkspaceTool, coerce
from toolwire.tools.workspace.errors import WorkspaceError
from toolwire.tools.workspace.outputs import FileList, GrepResult, ReadResult
from toolwire.tools.workspace.workspace import Workspace

MAX_STEPS = 8
_PRODUCERS: dict[type[Any], str] = {
    FileList: "find",
    GrepResult: "grep or search_files",
    ReadResult: "read_file",
}


class PipeStep(StrictArguments):
    tool: str = Field(description="find, grep, search_files or read_file.")
    args: dict[str, Any] = Field(default_factory=dict, description="That tool's arguments.")


class PipeArguments(StrictArguments):
    steps: list[PipeStep] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        description="The chain, first step first; each step gets the previous one's output.",
    )


@dataclass(slots=True)
class PipeOutput:
    """The last step's typed output, and which tool made it (for rendering)."""

    tool: str
    output: Any
    step: int
    steps: int

    @property
    def stopped_early(self) -> bool:
        return self.step < self.steps


class Pipe(WorkspaceTool):
    name = "pipe"
    description = (
        "Chain read-only tools (find, grep, search_files, read_file); each step works on the "
        "previous step's result and only the last result is shown. Example: "
        '[{"tool": "find", "args": {"pattern": "*.py"}}, {"tool": "grep", "args": '
        '{"pattern": "def main"}}, {"tool": "read_file"}]: find the Python files, grep them, '
        "then read each match in context."
    )
    Arguments = PipeArguments

    def __init__(self, workspace: Workspace, tools: list[WorkspaceTool]) -> None:
        super().__init__(workspace)
        self.tools = {t.name: t for t in tools if t.accepts and t.read_only}

    async def call(self, arguments: BaseModel, upstream: Any) -> PipeOutput:
        args = coerce(arguments, PipeArguments)
        previous: Any = upstream
        previous_name = ""
        total = len(args.steps)
        for index, step in enumerate(args.steps):
            number = index + 1
            tool = self._tool(step.tool, number)
            if previous is not None and not isinstance(previous, tool.accepts):
                takes = ", ".join(_PRODUCERS.get(t, t.__name__) for t in tool.accepts)
                raise WorkspaceError(
                    f"step {number} ({tool.name}) cannot take the output of step {index} "
                    f"({previous_name}); {tool.name} takes the output of: {takes}"
                )
            raw = dict(step.args)
            if previous is not None:
                raw.setdefault("path", ".")
            try:
                validated = tool.validate(raw)
            except ToolArgumentsError as exc:
                raise WorkspaceError(f"step {number} ({tool.name}): {exc}") from None
            try:
                previous = await tool.call(validated, previous)
            except WorkspaceError as exc:
                raise WorkspaceError(f"step {number} ({tool.name}): {exc}") from None
            previous_name = tool.name
            if number < total and len(previous) == 0:
                return PipeOutput(tool.name, previous, number, total)
        return PipeOutput(previous_name, previous, total, total)

    def render(self, output: Any) -> str:
        assert isinstance(output, PipeOutput)
        text = self.tools[output.tool].render(output.output)
        if output.stopped_early:
            return (
                f"[pipe stopped after step {output.step} of {output.steps} ({output.tool}): "
                f"it found nothing to pass on]\n{text}"
            )
        return text

    def _tool(self, name: str, number: int) -> WorkspaceTool:
        tool = self.tools.get(name)
        if tool is None:
            allowed = ", ".join(sorted(self.tools))
            raise WorkspaceError(
                f"step {number}: {name!r} cannot run in a pipe; pipe steps can use: {allowed}. "
                "Call other tools on their own"
            )
        return tool
