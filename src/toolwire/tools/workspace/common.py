"""What every workspace tool shares: a bound `Workspace`, and `call`, which is `run` plus the
previous pipe step's typed output."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from toolwire.tools.base import Tool
from toolwire.tools.workspace.workspace import Workspace

M = TypeVar("M", bound=BaseModel)


class StrictArguments(BaseModel):
    """Arguments models reject unknown fields, so a misspelt argument is an error the model
    sees rather than a silently ignored value."""

    model_config = ConfigDict(extra="forbid")


class WorkspaceTool(Tool):
    """A tool bound to one workspace.

    `accepts` lists the output types this tool can take from a previous pipe step (empty: it
    cannot run inside a pipe); `read_only` is false for tools that change files or run
    commands (used for MCP annotations and for keeping them out of pipes).
    """

    accepts: ClassVar[tuple[type[Any], ...]] = ()
    read_only: ClassVar[bool] = True

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    async def run(self, arguments: BaseModel) -> Any:
        return await self.call(arguments, None)

    async def call(self, arguments: BaseModel, upstream: Any) -> Any:
        """Run with `upstream`, the previous step's typed output (None outside a pipe)."""
        raise NotImplementedError


def coerce(arguments: BaseModel, model: type[M]) -> M:
    """`arguments` as an instance of `model` (re-validated when it is another model), keeping
    which fields were explicitly set."""
    if isinstance(arguments, model):
        return arguments
    return model.model_validate(arguments.model_dump(exclude_unset=True))
