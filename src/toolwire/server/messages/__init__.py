"""The Anthropic Messages door (`/v1/messages`, `/v1/messages/count_tokens`).

Claude Code and the Anthropic SDKs speak this API. The door translates a Messages request into
the loop's `LoopRequest` (`translate.py`), runs it through the same driver as every other door
(assembler, leak recovery, the result envelope), and writes the `LoopEvent`s out as Anthropic's
message object or stream events (`sink.py`). Errors leave in Anthropic's shape (`errors.py`).
The door stores nothing: Anthropic's API has no stored messages. See docs/anthropic.md.
"""
