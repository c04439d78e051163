"""A turn cut after its text had started to stream, asked again as a continuation: the same
request with the text so far as a trailing assistant message the server continues instead of
answering anew. No peer router does this; a gateway that holds the turn can.

Servers say it differently (`ResumeMode`): vLLM and SGLang continue the final message with
`continue_final_message: true` and `add_generation_prompt: false`; llama.cpp's `llama-server`
prefills from a trailing assistant message by default (and accepts the vLLM flags too);
toolwire's managed llama-cpp-python server prefills the same way (`upstream/llama_child.py`).

Not every turn can be continued so. A turn under structured output (a `response_format`, a
guided-decoding or grammar parameter, a forced tool choice) is constrained from its first
token: the server would start the structure again after the prefix (`{"name": "Al{"name":
…`), so such a turn is never continued (`resumable`). A continuation writes only what is
left of the turn's output budget: `max_tokens` less what the prefix took (estimated).
"""

from __future__ import annotations

from dataclasses import replace

from toolwire.transcript import AssistantMessage
from toolwire.upstream.base import TurnRequest
from toolwire.upstream.fleet.settings import ResumeMode

CONTINUE_FLAGS = {"continue_final_message": True, "add_generation_prompt": False}
#: Bytes a token, for the output a prefix took when nothing counts it better: the estimate
#: toolwire's usage metering makes (`loop/compaction.py`'s `BYTES_PER_TOKEN`).
BYTES_PER_TOKEN = 4
#: Output limits a request may carry among its pass-through parameters.
_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
#: Pass-through parameters that constrain the output's shape (vLLM's `guided_*` and
#: `structured_outputs`, llama.cpp's `grammar` and `json_schema`, SGLang's `regex` and `ebnf`).
_STRUCTURED = frozenset(
    {"grammar", "json_schema", "structured_outputs", "response_format", "regex", "ebnf"}
)


def can_resume(mode: ResumeMode) -> bool:
    return mode != "off"


def structured(request: TurnRequest) -> bool:
    """Whether the turn's output is constrained in shape (see the module docstring)."""
    format_ = request.sampling.response_format
    if format_ is not None and format_.get("type") not in (None, "text"):
        return True
    extra = request.sampling.extra_body or {}
    for key, value in extra.items():
        if key == "response_format":
            if isinstance(value, dict) and value.get("type") in (None, "text"):
                continue
            return True
        if key in _STRUCTURED or key.startswith("guided_"):
            return True
    return request.tool_choice not in (None, "auto", "none")


def resumable(request: TurnRequest) -> bool:
    """Whether a cut answer of this request may be continued at all (on a server that can)."""
    return not structured(request)


def estimate_tokens(text: str) -> int:
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def continuation(request: TurnRequest, prefix: str, mode: ResumeMode) -> TurnRequest:
    """`request`, asking the server to go on from `prefix` (the text the client has): after
    the client's own trailing assistant message (a prefill) when there is one, else as a new
    one; with the output budget left."""
    transcript = list(request.transcript)
    last = transcript[-1] if transcript else None
    if isinstance(last, AssistantMessage) and not last.tool_calls:
        transcript[-1] = replace(last, text=last.text + prefix)
    else:
        transcript.append(AssistantMessage(prefix))
    spent = estimate_tokens(prefix)
    sampling = request.sampling
    if sampling.max_output_tokens is not None:
        sampling = replace(sampling, max_output_tokens=max(1, sampling.max_output_tokens - spent))
    extra = dict(sampling.extra_body or {})
    for key in _LIMITS:
        value = extra.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            extra[key] = max(1, value - spent)
    if mode in ("auto", "continue_final_message"):
        extra.update(CONTINUE_FLAGS)
    if extra or sampling.extra_body is not None:
        sampling = replace(sampling, extra_body=extra)
    return replace(request, transcript=transcript, sampling=sampling)
