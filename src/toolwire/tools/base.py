"""The tool model (seed 002): a name, a JSON schema, a handler returning typed output, and
`render(output) -> str` used only at the boundary to the model.

Define a tool with the `@tool` decorator (the schema comes from the type hints, through pydantic)
or by subclassing `Tool`. Handlers may be sync (run in a worker thread) or async.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from toolwire.tools.readable import to_text
from toolwire.transcript import ToolSpec

F = TypeVar("F", bound=Callable[..., Any])


LOCAL_TOOLS_LABEL = "toolwire"
"""Tools toolwire runs itself (Python, workspace) appear as the MCP server of this label."""


class ToolArgumentsError(ValueError):
    """Arguments that do not fit the schema; the message is written for the model to act on."""


@functools.cache
def _arguments_schema(arguments: type[BaseModel]) -> dict[str, object]:
    """A tool's parameters, built once per `Arguments` class: pydantic builds the schema afresh
    on every call (about half a millisecond a tool), and every turn offers every tool."""
    schema = arguments.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


class Tool:
    """A tool toolwire can execute. Subclasses set `name`, `description`, `Arguments` and
    implement `run`; they may override `render` and set `timeout` (seconds)."""

    name: str = ""
    description: str = ""
    Arguments: type[BaseModel]
    timeout: float | None = None
    #: True, or a predicate over the arguments: the call waits for a human's approval.
    needs_approval: bool | Callable[[dict[str, object]], bool] = False

    async def run(self, arguments: BaseModel) -> Any:
        raise NotImplementedError

    def render(self, output: Any) -> str:
        """Typed output as the model should read it; the default is readable, not JSON."""
        return to_text(output)

    @property
    def parameters(self) -> dict[str, object]:
        return dict(_arguments_schema(self.Arguments))

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def validate(self, arguments: dict[str, object]) -> BaseModel:
        """Arguments checked against the schema; errors say what was wrong and what is expected."""
        try:
            return self.Arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {problems}. "
                f"Expected JSON schema: {_compact_schema(self.parameters)}"
            ) from None

    def requires_approval(self, arguments: dict[str, object]) -> bool:
        rule = self.needs_approval
        return rule(arguments) if callable(rule) else bool(rule)

    def may_require_approval(self) -> bool:
        """Could any call of this tool wait for approval? If not, its call can be shown live
        while the model is still writing its arguments."""
        return self.needs_approval is not False

    @property
    def server_label(self) -> str:
        """The `server_label` its calls show under in the Responses API (`mcp_call` items)."""
        return LOCAL_TOOLS_LABEL


class FunctionTool(Tool):
    """A tool made from a plain function by `@tool`."""

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        render: Callable[[Any], str] | None = None,
        timeout: float | None = None,
        needs_approval: bool | Callable[[dict[str, object]], bool] = False,
    ) -> None:
        self.function = function
        self.name = name or function.__name__
        self.description = description or inspect.cleandoc(function.__doc__ or "")
        self.Arguments = _arguments_model(function, self.name)
        self._render = render
        self.timeout = timeout
        self.needs_approval = needs_approval
        self._is_async = inspect.iscoroutinefunction(function)

    async def run(self, arguments: BaseModel) -> Any:
        kwargs = {key: getattr(arguments, key) for key in type(arguments).model_fields}
        if self._is_async:
            return await self.function(**kwargs)
        result = await asyncio.to_thread(self.function, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    def render(self, output: Any) -> str:
        return self._render(output) if self._render else to_text(output)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


@overload
def tool(function: F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    render: Callable[[Any], str] | None = None,
    timeout: float | None = None,
    needs_approval: bool | Callable[[dict[str, object]], bool] = False,
) -> Callable[[F], FunctionTool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    render: Callable[[Any], str] | None = None,
    timeout: float | None = None,
    needs_approval: bool | Callable[[dict[str, object]], bool] = False,
) -> FunctionTool | Callable[[F], FunctionTool]:
    """Make a tool from a function: `@tool` or `@tool(name=..., render=..., timeout=...)`."""

    def wrap(fn: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            fn,
            name=name,
            description=description,
            render=render,
            timeout=timeout,
            needs_approval=needs_approval,
        )

    return wrap(function) if function is not None else wrap


def _arguments_model(function: Callable[..., Any], name: str) -> type[BaseModel]:
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model: type[BaseModel] = create_model(
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


def _compact_schema(schema: dict[str, object]) -> str:
    import orjson

    return orjson.dumps(schema).decode()


ToolHandler = Callable[..., Any | Awaitable[Any]]
