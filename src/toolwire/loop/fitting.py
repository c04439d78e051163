"""Calls that fit the tool: the run's policy for checking every call against its tool's schema.

At a turn's end, before anything is handed to the client or run, each call of a declared tool
(a caller's `function`, a Python, workspace or MCP tool) is judged against the schema the tool
declared (`tools/argument_fit.py`): a call that fits goes on untouched, its argument bytes as
the model wrote them; one that fits after one-meaning repairs goes on repaired
(`ArgumentsRepaired`); one that does not is re-asked once, hidden from the client as the leak
re-ask is: the model reads its own turn back with an error result for each call, naming what
did not fit and where (`ArgumentsMisfit`, `retry`). A second misfit in a row goes on as the
model wrote it (`passed`: the client's own validation then answers the model, never worse
than no gateway); a call that is no JSON object at all stays the loop's to report (`rejected`).

Because a judged call may change or vanish, a checked call is not streamed live: it reaches
the client whole once judged. Live argument streaming stays where the outcome is certain:
the upstream enforces the tool's schema itself (a `strict` tool on an upstream known to honour
it, `upstream/strict.py`), the tool has no usable schema, or the check is off
(`LoopSettings.check_arguments`). Calls are judged once per turn, never per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from toolwire.loop.events import ArgumentsMisfit, ArgumentsRepaired, LoopEvent
from toolwire.loop.state import LoopRequest
from toolwire.tools.argument_fit import Fit, Verdict, fit_arguments
from toolwire.tools.base import Tool
from toolwire.tools.executor import ToolResult
from toolwire.tools.schema_check import CheckedSchema, checked_schema
from toolwire.transcript import ToolCall, ToolMessage, ToolSpec

Misfits = list[tuple[ToolCall, Fit]]

NOT_RUN = (
    "not run: another call of this turn did not fit its tool's schema, so no call of the turn "
    "ran. Make this call again if you still need it."
)


def misfit_message(call: ToolCall, fit: Fit) -> str:
    """What the model reads about its call that does not fit."""
    return (
        f"the arguments do not fit the input schema of {call.name}, so the call was not run: "
        f"{fit.explain()}. Call {call.name} again with arguments that fit its schema."
    )


class Fitting:
    """One run's checks: the compiled schema of each tool it offers, the re-asks made."""

    __slots__ = (
        "_declared",
        "_retries",
        "_schemas",
        "_server",
        "_specs",
        "_upstream",
        "enabled",
        "reasks",
    )

    def __init__(
        self, request: LoopRequest, server_tools: Mapping[str, Tool], upstream: object
    ) -> None:
        """`server_tools`: the run's own tools by name, read as they are when a call comes
        (MCP tools join once listed)."""
        settings = request.settings
        self.enabled = settings.check_arguments
        self.reasks = 0
        """Re-asks in a row; a turn whose calls all fit starts the count again."""
        self._specs: dict[str, ToolSpec] = {spec.name: spec for spec in request.client_tools}
        self._declared = request.caller_tools
        self._server = server_tools
        self._upstream = upstream
        self._schemas: dict[str, CheckedSchema | None] = {}
        self._retries = settings.argument_retries

    def schema(self, name: str) -> CheckedSchema | None:
        """The compiled schema of the tool the model calls `name`; None: nothing to check
        (an unknown name, a `custom` tool judged by its grammar, an unusable schema)."""
        if name in self._schemas:
            return self._schemas[name]
        parameters: Mapping[str, object] | None = None
        server = self._server.get(name)
        if server is not None:
            parameters = server.spec.parameters
        else:
            spec = self._specs.get(name)
            declared = self._declared.get(name) if self._declared is not None else None
            if spec is not None and (declared is None or declared.kind == "function"):
                parameters = spec.parameters
        compiled = checked_schema(parameters) if parameters is not None else None
        self._schemas[name] = compiled
        return compiled

    def streams_live(self, name: str) -> bool:
        """May a call of `name` go out while the model writes it? Only where judging it
        cannot change it (module docstring)."""
        if not self.enabled or self.schema(name) is None:
            return True
        spec = self._specs.get(name)
        enforced = getattr(self._upstream, "enforces_strict", False) is True
        return enforced and spec is not None and spec.strict is True and name not in self._server

    def untouched(self, call: ToolCall) -> bool:
        """True when judging `call` would leave it as it is (the single-turn fast path asks,
        and hands the turn to the driver otherwise)."""
        if not self.enabled:
            return True
        schema = self.schema(call.name)
        if schema is None:
            return True
        arguments = call.arguments if call.parse_error is None else None
        return fit_arguments(schema, arguments, call.raw_arguments).verdict in (
            Verdict.FITS,
            Verdict.NOT_AN_OBJECT,
        )

    def salvaged(
        self, name: str, arguments: dict[str, object], texts: Mapping[str, str]
    ) -> dict[str, object]:
        """The arguments of a call read from leaked text (`leaks/salvage.py`). Salvage types an
        XML parameter by how its text looks (`404` a number, `{"a": 1}` an object); where the
        tool's schema wants text there, the text is what the model wrote. So when the typed
        arguments do not fit and the texts do (with the one-meaning repairs, which type a
        text where the schema wants a number, a boolean, an array or an object), the texts
        win: a parameter is typed by the schema, as a model server's parser types it."""
        schema = self.schema(name) if self.enabled and texts else None
        if schema is None or schema.fits(arguments):
            return arguments
        as_written: dict[str, object] = {**arguments, **texts}
        fit = fit_arguments(schema, as_written, "")
        if fit.verdict is Verdict.FITS:
            return as_written
        if fit.verdict is Verdict.REPAIRED and fit.arguments is not None:
            return fit.arguments  # typed where the schema says: parsing, no repair to tell
        return arguments

    def judge(self, calls: list[ToolCall], emit: Callable[[LoopEvent], None]) -> Misfits:
        """Judge a turn's calls: repairs are made in place (and told); returns the calls to
        re-ask, with why (empty: the turn goes on, misfits included once re-asked)."""
        if not self.enabled:
            return []
        misfits: Misfits = []
        for call in calls:
            schema = self.schema(call.name)
            if schema is None:
                continue
            arguments = call.arguments if call.parse_error is None else None
            fit = fit_arguments(schema, arguments, call.raw_arguments)
            if fit.verdict is Verdict.REPAIRED:
                call.arguments = fit.arguments
                call.parse_error = None
                emit(ArgumentsRepaired(call, fit.repairs))
            elif fit.verdict is Verdict.MISFIT:
                misfits.append((call, fit))
        if not misfits:
            self.reasks = 0
            return []
        if self.reasks < self._retries:
            self.reasks += 1
            for call, fit in misfits:
                emit(ArgumentsMisfit(call, fit.explain(), self.reasks, "retry"))
            return misfits
        for call, fit in misfits:
            action: Literal["passed", "rejected"] = "passed" if call.ok else "rejected"
            emit(ArgumentsMisfit(call, fit.explain(), self.reasks + 1, action))
        return []

    @staticmethod
    def reask(
        calls: list[ToolCall],
        misfits: Misfits,
        error: Callable[[ToolCall, str], ToolResult],
        rejection: Callable[[ToolCall], str | None],
    ) -> list[ToolMessage]:
        """The results the model reads after its turn when it is re-asked: what did not fit,
        why a call that cannot run at all cannot (`rejection`: the loop's own words, None
        for a call that could), and that the turn's other calls did not run either
        (`error`: the executor's error result, the envelope every tool error is in)."""
        why = {id(call): fit for call, fit in misfits}
        results: list[ToolMessage] = []
        for call in calls:
            fit = why.get(id(call))
            text = misfit_message(call, fit) if fit is not None else rejection(call) or NOT_RUN
            results.append(ToolMessage(call.id, call.name, error(call, text).text))
        return results
