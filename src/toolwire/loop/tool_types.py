"""Caller-side tools as the client declared them and as the model sees them.

A chat-completions model only knows functions with flat names, so every caller-side tool is
offered as one: a `function` as itself; a function inside a `namespace` under the unambiguous
name `namespace__name`; a `custom` (freeform) tool as a function whose single string argument
`input` is the freeform text, its grammar described to the model and checked on the result
(`grammars.py`: Lark and regex, with LLGuidance as OpenAI does). `ClientTools` maps both ways:
the model's call back to the item the client declared (`function_call` with its `namespace`, or
`custom_tool_call` with its `input`), and history items forward to the names the model was
offered. The driver asks `problem()` whether a call can go
back; the sinks and history use the rest. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from toolwire.loop.grammars import grammar_problem, grammar_problem_async
from toolwire.transcript import ToolCall, ToolSpec

ToolKind = Literal["function", "custom"]

_NAME_LIMIT = 64
_NOT_A_NAME = re.compile(r"[^a-zA-Z0-9_-]")

FREEFORM_NOTE = (
    "This tool takes free-form text, not JSON: put the complete text, exactly as the tool "
    "expects it, in the string argument `input`."
)


@dataclass(slots=True, frozen=True)
class ClientTool:
    """One caller-side tool: `spec` is what the model is offered (its model-facing name);
    `name`, `namespace` and `kind` are how the client declared it."""

    spec: ToolSpec
    name: str
    kind: ToolKind = "function"
    namespace: str | None = None
    syntax: str | None = None
    """A custom tool's grammar syntax (`lark`, `regex`), if it declared one."""
    definition: str | None = None

    @property
    def model_name(self) -> str:
        return self.spec.name

    def problem(self, call: ToolCall) -> str | None:
        """Why this call cannot be handed back as the client declared the tool, or None."""
        if self.kind == "function":
            return call.parse_error if not call.ok else None
        text = custom_input(call)
        if text is None:
            return 'the arguments must be one JSON object {"input": "<the free-form text>"}'
        if self.syntax is not None and self.definition is not None:
            return grammar_problem(self.syntax, self.definition, text)
        return None

    async def problem_async(self, call: ToolCall) -> str | None:
        """`problem`, with a grammar checked in slices that yield to the event loop."""
        text = custom_input(call) if self.kind != "function" else None
        if text is not None and self.syntax is not None and self.definition is not None:
            return await grammar_problem_async(self.syntax, self.definition, text)
        return self.problem(call)


def custom_input(call: ToolCall) -> str | None:
    """A custom tool call's free-form text: the `input` argument (or the only string argument);
    when the model wrote raw text instead of JSON, that text."""
    arguments = call.arguments
    if isinstance(arguments, dict):
        value = arguments.get("input")
        if isinstance(value, str):
            return value
        if len(arguments) == 1:
            only = next(iter(arguments.values()))
            return only if isinstance(only, str) else None
        return None
    raw = call.raw_arguments
    return raw if raw.strip() and not raw.lstrip().startswith("{") else None


def custom_spec(
    name: str, description: str, syntax: str | None, definition: str | None
) -> ToolSpec:
    text_schema: dict[str, Any] = {"type": "string", "description": "the free-form input"}
    parts = [description.strip(), FREEFORM_NOTE] if description.strip() else [FREEFORM_NOTE]
    if syntax is not None and definition is not None:
        parts.append(f"The input must follow this {syntax} grammar:\n{definition}")
        if syntax == "regex":
            text_schema["pattern"] = definition
    parameters = {
        "type": "object",
        "properties": {"input": text_schema},
        "required": ["input"],
        "additionalProperties": False,
    }
    return ToolSpec(name, "\n\n".join(parts), parameters)


@dataclass(slots=True)
class ClientTools:
    """Every caller-side tool of one request, by the name the model sees."""

    tools: dict[str, ClientTool] = field(default_factory=dict)
    _declared: dict[tuple[str, str | None, str], str] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Iterable[ClientTool]) -> ClientTools:
        out = cls()
        for tool in tools:
            out.tools[tool.model_name] = tool
            out._declared[(tool.kind, tool.namespace, tool.name)] = tool.model_name
        return out

    def __contains__(self, model_name: object) -> bool:
        return model_name in self.tools

    def get(self, model_name: str) -> ClientTool | None:
        return self.tools.get(model_name)

    @property
    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    def model_name(self, kind: ToolKind, namespace: str | None, name: str) -> str:
        """The name the model knows a declared tool by (history items use the client's)."""
        known = self._declared.get((kind, namespace, name))
        if known is not None:
            return known
        return flat_name(namespace, name)


def flat_name(namespace: str | None, name: str) -> str:
    if not namespace:
        return name
    return _NOT_A_NAME.sub("_", f"{namespace}__{name}")[:_NAME_LIMIT]


def unique_name(wanted: str, taken: set[str]) -> str:
    """`wanted`, or `wanted_2`, `wanted_3`… when another tool already has it."""
    name = wanted[:_NAME_LIMIT]
    counter = 2
    while name in taken:
        suffix = f"_{counter}"
        name = wanted[: _NAME_LIMIT - len(suffix)] + suffix
        counter += 1
    taken.add(name)
    return name
