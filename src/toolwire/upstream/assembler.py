"""Assembling streamed tool calls from every delta variant real servers send (seed 003).

See `shared/reference/stream-variants.md`. The rules, in short: calls are keyed by index and fall
back to id; a new id arriving *with a name* at a used index starts a new call (parallel calls all
at index 0), while a new id without one is id churn on the same call; the first non-empty id and
name win; string fragments append, objects replace; `finish_reason` is never trusted alone; at the
end arguments are parsed strictly, then recovered, and otherwise the call carries `parse_error`
and is never run.

One `StreamAssembler` per model turn. `feed()` takes a decoded chunk and returns the
`ModelEvent`s it produced; `finish()` closes the turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jiter
import orjson

from toolwire.transcript import ToolCall
from toolwire.upstream.arguments import ArgumentsError, is_complete_object, parse_arguments
from toolwire.upstream.events import (
    ModelEvent,
    ReasoningDelta,
    Repair,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnEnd,
    Usage,
)
from toolwire.upstream.names import ToolNameMatcher, clean_tool_name
from toolwire.wire.responses import plain_id

_ARGUMENT_FIELDS = ("arguments", "parsed_arguments", "args", "input")
_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}


class _PendingCall:
    __slots__ = ("id", "key", "name", "obj", "parts", "started")

    def __init__(self, key: int, call_id: str) -> None:
        self.key = key
        self.id = call_id
        self.name = ""
        self.parts: list[str] = []
        self.obj: Any = None
        self.started = False

    def has_arguments(self) -> bool:
        return bool(self.parts) or self.obj is not None

    def is_open(self) -> bool:
        """Arguments begun but not yet a whole object: this call cannot have ended."""
        return bool(self.parts) and self.obj is None and not is_complete_object("".join(self.parts))


def matched_stop(choice: dict[str, Any]) -> str | None:
    """The stop string that ended the turn, where the server names it: vLLM's `stop_reason`,
    SGLang's `matched_stop` (both an int for a stop token, None for end of sequence)."""
    for key in ("stop_reason", "matched_stop"):
        value = choice.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _ends_object(parts: list[str]) -> bool:
    """Does the text built so far end with `}` (the only way it can be a whole object)?"""
    for part in reversed(parts):
        stripped = part.rstrip()
        if stripped:
            return stripped.endswith("}")
    return False


def _new_call_id() -> str:
    return plain_id("call_")  # names the call within its turn; grants nothing


def _text_of(value: Any) -> str:
    """Content as a string or as typed parts (`[{"type": "text", "text": ...}]`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        out = []
        for part in value:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    out.append(text)
        return "".join(out)
    return ""


#: A call's argument text goes out in deltas of at most this many characters: a server that
#: sends a megabyte in one chunk would otherwise make one event whose handling by a door
#: (settling it for live streaming) holds the event loop for that long.
ARGUMENT_DELTA_CHARS = 4096


def _argument_deltas(key: int, text: str, events: list[ModelEvent]) -> None:
    for start in range(0, len(text), ARGUMENT_DELTA_CHARS):
        events.append(ToolCallArgumentsDelta(key, text[start : start + ARGUMENT_DELTA_CHARS]))


#: Matchers of the declared tool lists seen lately: a turn's assembler takes its list's
#: matcher (immutable) instead of making one (~1% of a proxied request). Cleared when full.
_MATCHERS: dict[tuple[str, ...], ToolNameMatcher] = {}
MATCHERS_SIZE = 64


def _matcher(declared_tools: Iterable[str] | None) -> ToolNameMatcher:
    if declared_tools is None:
        return ToolNameMatcher(None)
    key = tuple(declared_tools)
    matcher = _MATCHERS.get(key)
    if matcher is None:
        if len(_MATCHERS) >= MATCHERS_SIZE:
            _MATCHERS.clear()
        matcher = _MATCHERS[key] = ToolNameMatcher(key)
    return matcher


class StreamAssembler:
    """Turns chat-completions chunks (in any variant) into clean `ModelEvent`s for one turn."""

    def __init__(self, declared_tools: Iterable[str] | None = None) -> None:
        self._matcher = _matcher(declared_tools)
        self._calls: list[_PendingCall] = []
        self._by_index: dict[int, _PendingCall] = {}
        self._by_id: dict[str, _PendingCall] = {}
        self._legacy: _PendingCall | None = None
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None
        self.saw_chunk = False
        self.saw_text = False
        self.saw_reasoning = False
        #: the field the upstream wrote its reasoning in (where it reads it back)
        self.reasoning_field = "reasoning_content"
        self.repairs: list[str] = []
        """The repairs this turn needed, once per kind (`docs/operations.md` lists the kinds)."""
        self._last_key = -1

    def _repair(self, kind: str, events: list[ModelEvent]) -> None:
        """Note a repair (only ever on a deviation's path, never per ordinary chunk)."""
        if kind not in self.repairs:
            self.repairs.append(kind)
            events.append(Repair(kind))

    # -- feeding --------------------------------------------------------------------------

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        """One decoded chunk (a chat-completion chunk, or a Responses-style event)."""
        self.saw_chunk = True
        events: list[ModelEvent] = []
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                calls = delta.get("tool_calls")
                if not (
                    len(delta) == 1
                    and type(calls) is list
                    and len(calls) == 1
                    and type(calls[0]) is dict
                    and self._continued(calls[0], events)
                ):
                    self._delta(delta, events)
            message = choice.get("message")
            if message:
                self._repair("message_mid_stream", events)
                self._message(message, events)
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = reason
                self.stop_sequence = matched_stop(choice)
        else:
            kind = chunk.get("type")
            if isinstance(kind, str) and kind.startswith("response."):
                self._repair("responses_events", events)
                self._responses_event(kind, chunk, events)
        usage = chunk.get("usage")
        if usage:
            events.append(usage_from(usage))
        return events

    def feed_message(
        self, message: dict[str, Any], finish_reason: str | None, stop_sequence: str | None = None
    ) -> list[ModelEvent]:
        """A whole (non-streamed) assistant message, as `choices[0].message` of a response;
        `stop_sequence` as `matched_stop` reads it from the choice."""
        self.saw_chunk = True
        events: list[ModelEvent] = []
        if not self._plain_message(message, events):
            self._message(message, events)
        if finish_reason:
            self.finish_reason = finish_reason
            self.stop_sequence = stop_sequence
        return events

    def _delta(self, delta: dict[str, Any], events: list[ModelEvent]) -> None:
        content = delta.get("content")
        if content:
            if type(content) is not str:
                self._repair("content_as_list", events)
            text = _text_of(content)
            if text:
                self.saw_text = True
                events.append(TextDelta(text))
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            text = _text_of(reasoning)
            if text:
                if not self.saw_reasoning and not delta.get("reasoning_content"):
                    self.reasoning_field = "reasoning"
                self.saw_reasoning = True
                events.append(ReasoningDelta(text))
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            if content or reasoning:
                self._repair("mixed_delta", events)
            for entry in tool_calls:
                if isinstance(entry, dict):
                    self._tool_delta(entry, events)
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            self._repair("legacy_function_call", events)
            self._legacy_delta(legacy)

    def _message(self, message: dict[str, Any], events: list[ModelEvent]) -> None:
        """A full message: new text only if streamed deltas brought none; calls hydrate."""
        if not self.saw_reasoning:
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            rtext = _text_of(reasoning) if reasoning else ""
            if rtext:
                if not message.get("reasoning_content"):
                    self.reasoning_field = "reasoning"
                self.saw_reasoning = True
                events.append(ReasoningDelta(rtext))
        if not self._calls and not self.saw_text:
            content = message.get("content")
            text = _text_of(content) if content else ""
            if text:
                self.saw_text = True
                events.append(TextDelta(text))
        tool_calls = message.get("tool_calls")
        if tool_calls:
            for position, entry in enumerate(tool_calls):
                if isinstance(entry, dict):
                    self._hydrate(position, entry, events)
        legacy = message.get("function_call")
        if isinstance(legacy, dict):
            self._repair("legacy_function_call", events)
            self._legacy_delta(legacy)

    def _plain_message(self, message: dict[str, Any], events: list[ModelEvent]) -> bool:
        """The common whole message, taken as `_message` takes it, with none of its lookups:
        text or none, no reasoning, and calls each with its own id and index, a declared name
        as written and arguments as text. Anything else: False, nothing changed."""
        if self._calls or self.saw_text or self.saw_reasoning:
            return False
        content = message.get("content")
        calls = message.get("tool_calls")
        if (
            (content is not None and type(content) is not str)
            or (calls is not None and type(calls) is not list)
            or message.get("reasoning_content")
            or message.get("reasoning")
            or isinstance(message.get("function_call"), dict)
        ):
            return False
        plain: list[tuple[str, str, str, Any]] = []
        if calls:
            names = self._matcher.as_declared
            ids: set[str] = set()
            indices: set[int] = set()
            for entry in calls:
                function = entry.get("function") if type(entry) is dict else None
                if type(function) is not dict:
                    return False
                call_id, name = entry.get("id"), function.get("name")
                arguments = function.get("arguments")
                index = entry.get("index")
                if (
                    type(call_id) is not str
                    or not call_id
                    or call_id in ids
                    or type(name) is not str
                    or name not in names
                    or type(arguments) is not str
                    or not arguments.strip()
                    or not (index is None or (type(index) is int and index not in indices))
                ):
                    return False
                ids.add(call_id)
                if index is not None:
                    indices.add(index)
                plain.append((call_id, name, arguments, index))
        if content:
            events.append(TextDelta(content))
        for call_id, name, arguments, index in plain:
            call = self._new(call_id)
            if index is not None:
                self._by_index[index] = call
            call.name = name
            call.parts.append(arguments)
            call.started = True
            events.append(ToolCallStarted(call.key, call_id, name))
            _argument_deltas(call.key, arguments, events)
        return True

    # -- tool-call deltas -----------------------------------------------------------------

    @staticmethod
    def piece_of(chunk: dict[str, Any]) -> tuple[int, str] | None:
        """(index, arguments) when `chunk` says nothing but one argument piece of one call:
        its first choice's delta `{"tool_calls": [{"index": i, "function": {"arguments": ..}}]}`,
        no message, finish reason or usage (other fields `feed` does not read): what
        `feed_piece` takes in the chunk's place."""
        choices = chunk.get("choices")
        if type(choices) is not list or not choices or chunk.get("usage"):
            return None
        choice = choices[0]
        if type(choice) is not dict or choice.get("message") or choice.get("finish_reason"):
            return None
        delta = choice.get("delta")
        calls = delta.get("tool_calls") if type(delta) is dict and len(delta) == 1 else None
        if type(calls) is not list or len(calls) != 1 or type(calls[0]) is not dict:
            return None
        entry = calls[0]
        function = entry.get("function")
        if len(entry) != 2 or type(function) is not dict or len(function) != 1:
            return None
        index, arguments = entry.get("index"), function.get("arguments")
        return (index, arguments) if type(index) is int and type(arguments) is str else None

    def feed_piece(self, index: int, arguments: str) -> list[ModelEvent] | None:
        """What `feed` makes of a chunk that `piece_of` reads as (index, arguments), when the
        piece continues the call last seen; else None, nothing changed (`feed` the chunk)."""
        events: list[ModelEvent] = []
        return events if self._piece(index, arguments, events) else None

    def _continued(self, entry: dict[str, Any], events: list[ModelEvent]) -> bool:
        """The common chunk, `{"index": i, "function": {"arguments": "..."}}` continuing the
        call last seen, already started: its piece appended, True. The general path
        (`_tool_delta`) would find the same call, note no repair and append; this skips its
        dozen lookups (`feed` tries it first for a delta of that one entry: most chunks)."""
        function = entry.get("function")
        if len(entry) != 2 or type(function) is not dict or len(function) != 1:
            return False
        arguments = function.get("arguments")
        index = entry.get("index")
        if type(arguments) is not str or type(index) is not int:
            return False
        return self._piece(index, arguments, events)

    def _piece(self, index: int, arguments: str, events: list[ModelEvent]) -> bool:
        call = self._by_index.get(index)
        if call is None or call.key != self._last_key or not call.started:
            return False
        if arguments:
            first = arguments[0]
            if (
                first not in '{"['
                and not first.isspace()
                and call.obj is None
                and len(arguments) <= ARGUMENT_DELTA_CHARS
            ):
                # no new object can begin here (`_append`'s restart check): one more piece
                call.parts.append(arguments)
                events.append(ToolCallArgumentsDelta(call.key, arguments))
            else:
                self._append(call, arguments, events)
        return True

    def _tool_delta(self, entry: dict[str, Any], events: list[ModelEvent]) -> None:
        if self._continued(entry, events):
            return
        function = entry.get("function")
        if not isinstance(function, dict):
            function = {}
        index = entry.get("index")
        if not isinstance(index, int):
            index = None
            self._repair("index_missing", events)
        elif index and not self._calls:
            self._repair("first_index_nonzero", events)
        call_id = entry.get("id") or None
        if call_id is None:
            call_id = function.get("id") or None
            if call_id is not None:
                self._repair("name_late_or_repeated", events)
        name = function.get("name") or entry.get("name") or None
        call = self._locate(index, call_id, name, events)
        if index is not None:
            self._by_index[index] = call
        if call.key < self._last_key:
            self._repair("parallel_interleaved", events)
        self._last_key = call.key
        arguments = _arguments_of(function, entry)
        if arguments is not None and "arguments" not in function:
            self._repair("alternate_argument_field", events)
        self._apply(call, call_id, name, arguments, events)

    def _locate(
        self, index: int | None, call_id: str | None, name: str | None, events: list[ModelEvent]
    ) -> _PendingCall:
        if call_id is not None:
            known = self._by_id.get(call_id)
            if known is not None:
                self._repair("id_repeated", events)
                return known
        if index is not None:
            current = self._by_index.get(index)
        else:
            current = self._calls[-1] if self._calls else None
        if current is None:
            return self._new(call_id)
        if name is not None and current.name:
            cleaned = clean_tool_name(name)
            if call_id is not None:
                # Unknown id with a name at a used index: a new parallel call, unless the
                # current call is mid-arguments under that same name (an id that churns).
                if cleaned == current.name and current.is_open():
                    return current
                self._repair("parallel_calls_same_index", events)
                return self._new(call_id)
            if cleaned != current.name and current.has_arguments():
                self._repair("parallel_calls_same_index", events)
                return self._new(call_id)
        return current

    def _new(self, call_id: str | None) -> _PendingCall:
        call = _PendingCall(len(self._calls), call_id or "")
        self._calls.append(call)
        if call_id:
            self._by_id[call_id] = call
        return call

    def _apply(
        self,
        call: _PendingCall,
        call_id: str | None,
        name: str | None,
        arguments: Any,
        events: list[ModelEvent],
    ) -> None:
        if call_id is not None and call_id not in self._by_id:
            self._by_id[call_id] = call
            if not call.id:
                call.id = call_id
            else:
                self._repair("id_churn", events)
        if name is not None:
            if not call.name:
                cleaned = clean_tool_name(name)
                if cleaned:
                    call.name = self._matcher.match(cleaned) or cleaned
                    if call.name != name:
                        self._repair("name_punctuation", events)
            elif call.started:
                self._repair("name_late_or_repeated", events)
        if arguments is not None:
            if not call.name:
                self._repair("name_late_or_repeated", events)
            if isinstance(arguments, str):
                if arguments:
                    if not call.started and call.name and not call.parts and call.obj is None:
                        self._repair("whole_call_one_delta", events)
                    self._append(call, arguments, events)
            else:
                self._repair("arguments_object", events)
                call.obj = arguments
                call.parts = []
        if not call.started and call.name:
            self._start(call, events)

    def _append(self, call: _PendingCall, fragment: str, events: list[ModelEvent]) -> None:
        if call.obj is not None or call.parts:
            head = fragment.lstrip()[:1]
            if head and head in '{"[' and self._restarts(call, fragment):
                # A whole object already, and a new one begins: a repeat or a correction
                # (summary chunks, seeded "{}"). Replace; concatenating would be `{}{...}`.
                seeded = call.obj is None and "".join(call.parts).strip() in ("{}", "")
                self._repair("empty_arguments_seed" if seeded else "calls_repeated_at_end", events)
                call.obj = None
                call.parts = [fragment]
                return
        call.parts.append(fragment)
        if call.started:
            _argument_deltas(call.key, fragment, events)

    @staticmethod
    def _restarts(call: _PendingCall, fragment: str) -> bool:
        """Does `fragment` begin the arguments anew rather than continue them?

        Yes when what was built is already a whole object (a repeat, or a seeded `{}`), or when
        the fragment is itself a whole object beginning with the text built so far (a final
        chunk re-sending everything after a partial stream). A nested value (`{"a": ` then
        `{"b": 1}}`) is neither, and appends. The cheap checks on the last characters come
        first: most token-sized fragments start with `"`, and joining and parsing everything
        built so far for each of them would make assembly quadratic in the arguments' length.
        """
        if call.obj is not None:
            return True
        if _ends_object(call.parts) and is_complete_object("".join(call.parts)):
            return True
        if not fragment.rstrip().endswith("}"):
            return False
        built = "".join(call.parts)
        return fragment.lstrip().startswith(built.strip()) and is_complete_object(fragment)

    def _start(self, call: _PendingCall, events: list[ModelEvent]) -> None:
        call.started = True
        if not call.id:
            call.id = _new_call_id()
        events.append(ToolCallStarted(call.key, call.id, call.name))
        if call.parts and call.obj is None:
            _argument_deltas(call.key, "".join(call.parts), events)

    def _hydrate(self, position: int, entry: dict[str, Any], events: list[ModelEvent]) -> None:
        """A full call object (message.tool_calls): fill in or replace what deltas built."""
        function = entry.get("function")
        if not isinstance(function, dict):
            function = {}
        call_id = entry.get("id") or function.get("id") or None
        index = entry.get("index")
        call: _PendingCall | None = self._by_id.get(call_id) if call_id else None
        if call is None and isinstance(index, int):
            call = self._by_index.get(index)
        if call is None and position < len(self._calls) and call_id is None:
            call = self._calls[position]
        if call is None:
            call = self._new(call_id)
            if isinstance(index, int):
                self._by_index[index] = call
        arguments = _arguments_of(function, entry)
        name = function.get("name") or entry.get("name") or None
        if isinstance(arguments, str) and arguments.strip():
            call.parts = []
            call.obj = None
            call.parts.append(arguments)
            self._apply(call, call_id, name, None, events)
        else:
            self._apply(call, call_id, name, arguments if arguments else None, events)

    def _legacy_delta(self, function: dict[str, Any]) -> None:
        """The pre-tools `function_call` field; used only if no `tool_calls` ever arrive."""
        legacy = self._legacy
        if legacy is None:
            legacy = self._legacy = _PendingCall(-1, "")
        name = function.get("name")
        if name and not legacy.name:
            legacy.name = clean_tool_name(name)
        arguments = _arguments_of(function, {})
        if isinstance(arguments, str):
            if arguments:
                if legacy.parts and is_complete_object("".join(legacy.parts)):
                    legacy.parts = [arguments]
                else:
                    legacy.parts.append(arguments)
        elif arguments is not None:
            legacy.obj = arguments

    # -- Responses-style events inside a chat stream ------------------------------------

    def _responses_event(self, kind: str, event: dict[str, Any], events: list[ModelEvent]) -> None:
        if kind == "response.output_text.delta":
            delta = event.get("delta")
            if isinstance(delta, str) and delta:
                events.append(TextDelta(delta))
            return
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                call = self._by_any_id(item.get("call_id"), item.get("id"))
                arguments = item.get("arguments")
                if kind.endswith(".done") and isinstance(arguments, str) and arguments.strip():
                    call.parts = [arguments]
                    call.obj = None
                    arguments = None
                elif isinstance(arguments, str):
                    arguments = arguments or None
                self._apply(call, None, item.get("name"), arguments, events)
            return
        if kind == "response.function_call_arguments.delta":
            call = self._by_any_id(event.get("call_id"), event.get("item_id"), event.get("id"))
            delta = event.get("delta")
            self._apply(
                call, None, event.get("name"), delta if isinstance(delta, str) else None, events
            )
            return
        if kind == "response.function_call_arguments.done":
            call = self._by_any_id(event.get("call_id"), event.get("item_id"), event.get("id"))
            arguments = event.get("arguments")
            if isinstance(arguments, str) and arguments.strip():
                # A .done carries the whole text: it replaces, it never appends.
                call.parts = [arguments]
                call.obj = None
            elif isinstance(arguments, dict) and arguments:
                call.obj = arguments
                call.parts = []
            self._apply(call, None, event.get("name"), None, events)

    def _by_any_id(self, *ids: Any) -> _PendingCall:
        present = [i for i in ids if isinstance(i, str) and i]
        for candidate in present:
            call = self._by_id.get(candidate)
            if call is not None:
                for alias in present:
                    self._by_id.setdefault(alias, call)
                return call
        call = self._new(present[0] if present else None)
        for alias in present:
            self._by_id.setdefault(alias, call)
        return call

    def partial_arguments(self, key: int) -> dict[str, Any] | None:
        """The arguments of a call still streaming, parsed as far as they go (jiter's partial
        mode), e.g. to show progress. Computed on demand, never per delta: re-parsing a growing
        string on every fragment would make assembly quadratic."""
        if not 0 <= key < len(self._calls):
            return None
        call = self._calls[key]
        if call.obj is not None:
            return call.obj if isinstance(call.obj, dict) else None
        text = "".join(call.parts).strip()
        if not text:
            return None
        try:
            value = jiter.from_json(text.encode(), partial_mode="trailing-strings")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def is_empty(self) -> bool:
        """Nothing at all arrived: no text, no reasoning, no call."""
        return not (self.saw_text or self.saw_reasoning or self._calls or self._legacy)

    # -- finishing ------------------------------------------------------------------------

    def argument_chars(self) -> int:
        """How much argument text `finish` will parse (and maybe repair)."""
        chars = 0
        for call in self._calls:
            for part in call.parts:
                chars += len(part)
        return chars

    def finish(self) -> list[ModelEvent]:
        """Close the turn: every call parsed and validated, then `TurnEnd`."""
        events: list[ModelEvent] = []
        legacy = self._legacy
        if not self._calls and legacy is not None and (legacy.name or legacy.has_arguments()):
            legacy.key = 0
            self._calls.append(legacy)
            if legacy.name:
                legacy.name = self._matcher.match(legacy.name) or legacy.name
        raw_reason = self.finish_reason
        for call in self._calls:
            if not call.started and call.name:
                self._start(call, events)
            events.append(ToolCallDone(call.key, self._final(call, raw_reason, events)))
        reason = _FINISH_REASONS.get(raw_reason or "", "stop")
        if raw_reason is None and self.saw_chunk:
            self._repair("no_finish_reason", events)
        if self._calls and reason != "length":
            if reason != "tool_calls":
                self._repair("finish_reason_mismatch", events)
            reason = "tool_calls"
        elif not self._calls and reason == "tool_calls":
            self._repair("finish_reason_mismatch", events)
            reason = "stop"
        events.append(TurnEnd(reason, self.stop_sequence if reason == "stop" else None))
        return events

    def _final(
        self, call: _PendingCall, raw_reason: str | None, events: list[ModelEvent]
    ) -> ToolCall:
        if not call.id:
            call.id = _new_call_id()
        raw = "".join(call.parts) if call.obj is None else _dump(call.obj)
        arguments: dict[str, Any] | None = None
        error: str | None = None
        if call.obj is not None:
            if isinstance(call.obj, dict):
                arguments = call.obj
            else:
                error = f"arguments must be a JSON object, got {type(call.obj).__name__}"
        else:
            try:
                arguments = _strict_object(raw)
                if arguments is None:
                    arguments = parse_arguments(raw)
                    self._repair("arguments_recovered", events)
            except ArgumentsError as exc:
                error = str(exc)
                if raw_reason == "length":
                    error = "the call was cut off (finish_reason: length): " + error
        name = call.name
        if name in self._matcher.as_declared:
            pass  # `match` gives it back as it is
        elif not name:
            error = "the call has no tool name" + (f"; {error}" if error else "")
        else:
            matched = self._matcher.match(name)
            if matched is None:
                declared = self._matcher.declared or frozenset()
                listing = ", ".join(sorted(declared)) or "none"
                error = f"unknown tool {name!r}; declared tools: {listing}" + (
                    f"; {error}" if error else ""
                )
            else:
                name = matched
        if error is not None:
            arguments = None
        return ToolCall(
            id=call.id,
            name=name,
            arguments=arguments,
            raw_arguments=raw,
            parse_error=error,
            index=call.key,
        )


def _arguments_of(function: dict[str, Any], entry: dict[str, Any]) -> Any:
    """The arguments under whichever field this server uses; None when absent."""
    empty = None
    for source in (function, entry):
        for field_name in _ARGUMENT_FIELDS:
            value = source.get(field_name)
            if value is None:
                continue
            if value == "":
                empty = value  # an empty `arguments` must not hide `args` beside it
                continue
            return value
    return empty


def _strict_object(raw: str) -> dict[str, Any] | None:
    """The arguments if they are one well-formed JSON object (or empty), else None; the same
    single parse `parse_arguments` starts with, so the common case costs nothing extra."""
    text = raw.strip()
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _dump(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def usage_from(usage: dict[str, Any]) -> Usage:
    """Chat-completions (`prompt_tokens`) or Responses (`input_tokens`) usage, normalized."""
    get = usage.get
    details = get("completion_tokens_details") or get("output_tokens_details")
    prompt_details = get("prompt_tokens_details") or get("input_tokens_details")
    return Usage(
        int(get("prompt_tokens") or get("input_tokens") or 0),
        int(get("completion_tokens") or get("output_tokens") or 0),
        int(details.get("reasoning_tokens") or 0) if details else 0,
        int(prompt_details.get("cached_tokens") or 0) if prompt_details else 0,
    )
