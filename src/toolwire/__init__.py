"""toolwire: an agent gateway that makes tool calling on open models solid."""

import toolwire.lean_httpx  # noqa: F401  (first: before anything imports httpx)
from toolwire.agent import Agent, RunResult
from toolwire.loop.state import LoopSettings
from toolwire.tools.base import Tool, tool
from toolwire.upstream.chat_completions import ChatCompletionsUpstream

__all__ = ["Agent", "ChatCompletionsUpstream", "LoopSettings", "RunResult", "Tool", "tool"]
__version__ = "0.1.0"
