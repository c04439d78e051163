"""A turn cut after its text had started to stream, asked again as a continuation: the same
request with the text so far as a trailing assistant message the server continues instead of
answering anew. No peer router does this; a gateway that holds the turn can.

Servers say it differently (`ResumeMode`): vLLM and SGLang continue the final message with
`continue_final_message: true` and `add_generation_prompt: false`; llama.cpp's `llama-server`
prefills from a trailing assistant message by default (and accepts the vLLM flags too);
toolwire's managed llama-cpp-python server prefills the same way (`upstream/llama_child.py`).
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.transcript import AssistantMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.fleet.settings import ResumeMode

CONTINUE_FLAGS = {"continue_final_message": True, "add_generation_prompt": False}


def can_resume(mode: ResumeMode) -> bool:
    return mode != "off"


def continuation(request: TurnRequest, prefix: str, mode: ResumeMode) -> TurnRequest:
    """`request`, asking the server to go on from `prefix` (the text the client has)."""
    transcript = [*request.transcript, AssistantMessage(prefix)]
    sampling = request.sampling
    if mode in ("auto", "continue_final_message"):
        extra = {**(sampling.extra_body or {}), **CONTINUE_FLAGS}
        sampling = replace(sampling, extra_body=extra)
    # a forced tool choice was not what this turn did: it was writing text
    choice = request.tool_choice if request.tool_choice in (None, "auto", "none") else "auto"
    return replace(request, transcript=transcript, sampling=sampling, tool_choice=choice)
