"""Scripts for `ScriptedUpstream` as plain JSON (for `toolwire scripted-upstream FILE`), and the
scripted weather demo.

A script is a list of turns, each one of:
`{"reply": {"text": ..., "tool_calls": [[name, {args}]], "reasoning": ...}}`,
`{"chunks": [...], "done": true, "delay": 0.0, "disconnect_after": null}`, or
`{"status": 500, "body": {...}, "headers": {...}}`.
"""

from __future__ import annotations

from typing import Any

from toolwire.testing.scripted import Body, Chunks, Reply, Turn


def load_script(turns: list[dict[str, Any]]) -> list[Turn]:
    out: list[Turn] = []
    for position, turn in enumerate(turns):
        if "reply" in turn:
            r = turn["reply"]
            calls = [(c[0], c[1]) for c in r.get("tool_calls", [])]
            out.append(
                Reply(r.get("text", ""), calls, r.get("reasoning", ""), r.get("finish_reason"))
            )
        elif "chunks" in turn:
            out.append(
                Chunks(
                    turn["chunks"],
                    delay=turn.get("delay", 0.0),
                    done=turn.get("done", True),
                    disconnect_after=turn.get("disconnect_after"),
                )
            )
        elif "body" in turn:
            out.append(Body(turn["body"], turn.get("status", 200), turn.get("headers", {})))
        else:
            raise ValueError(f"turn {position}: expected one of reply, chunks, body")
    return out


def WEATHER_DEMO() -> list[Turn]:
    """Two parallel weather lookups, a conversion, then the answer."""
    return [
        Reply(
            text="Let me look up both cities.",
            tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})],
        ),
        Reply(tool_calls=[("convert_temperature", {"celsius": 18})]),
        Reply(text="Paris is warmer: 18 °C (64.4 °F) with light rain, against 4 °C in Oslo."),
    ]
