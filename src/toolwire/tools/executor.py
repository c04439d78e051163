"""Running one turn's tool calls: validated, bounded in concurrency and time, results in order.

Nothing here raises for a bad call: a parse error, an unknown name, invalid arguments, a timeout
or an exception in the handler all become an error result the model can read and act on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from toolwire.tools.base import Tool, ToolArgumentsError
from toolwire.tools.envelope import EnvelopeLimits, render_envelope
from toolwire.transcript import ToolCall


@dataclass(slots=True)
class ToolResult:
    """A finished call: its typed `output`, the rendered `output_text`, and `text`, the
    envelope the model reads."""

    call_id: str
    name: str
    ok: bool
    output: Any
    output_text: str
    error: str
    text: str


class ToolExecutor:
    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        limits: EnvelopeLimits | None = None,
        max_concurrency: int = 8,
        default_timeout: float | None = 120.0,
    ) -> None:
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.limits = limits or EnvelopeLimits()
        self.max_concurrency = max_concurrency
        self.default_timeout = default_timeout

    async def execute(self, calls: list[ToolCall]) -> list[ToolResult]:
        """Run the calls concurrently (at most `max_concurrency` at once), results in call order."""
        if len(calls) == 1:
            return [await self.execute_one(calls[0])]
        gate = asyncio.Semaphore(self.max_concurrency)

        async def bounded(call: ToolCall) -> ToolResult:
            async with gate:
                return await self.execute_one(call)

        return list(await asyncio.gather(*(bounded(c) for c in calls)))

    async def execute_one(self, call: ToolCall) -> ToolResult:
        tool = self.tools.get(call.name)
        if call.parse_error is not None or call.arguments is None:
            return self.error(call, _unusable_call_message(call, tool))
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            return self.error(call, f"unknown tool {call.name!r}. Available tools: {available}")
        try:
            arguments = tool.validate(call.arguments)
        except ToolArgumentsError as exc:
            return self.error(call, str(exc))
        timeout = tool.timeout if tool.timeout is not None else self.default_timeout
        try:
            output = await asyncio.wait_for(tool.run(arguments), timeout)
        except TimeoutError:
            return self.error(call, f"{call.name} timed out after {timeout:g} seconds")
        except Exception as exc:  # a tool's failure is the model's information, not our crash
            return self.error(call, f"{type(exc).__name__}: {exc}")
        try:
            text = tool.render(output)
        except Exception as exc:
            return self.error(call, f"the tool ran but its output could not be rendered: {exc}")
        return ToolResult(
            call.id,
            call.name,
            True,
            output,
            text,
            "",
            render_envelope(call.name, ok=True, output=text, limits=self.limits),
        )

    def error(self, call: ToolCall, message: str, output: str = "") -> ToolResult:
        envelope = render_envelope(
            call.name or "(unnamed)", ok=False, error=message, output=output, limits=self.limits
        )
        return ToolResult(call.id, call.name, False, None, output, message, envelope)


def _unusable_call_message(call: ToolCall, tool: Tool | None) -> str:
    parts = [f"the tool call could not be used: {call.parse_error or 'no arguments'}."]
    if call.raw_arguments:
        parts.append(f"Arguments as received: {call.raw_arguments}")
    if tool is not None:
        schema = orjson.dumps(tool.parameters).decode()
        parts.append(f"Call {tool.name} again with one JSON object matching: {schema}")
    return " ".join(parts)
