"""One simulated model server of the fleet benchmark (`benchmarks/fleet.py`): an
OpenAI-compatible chat-completions server whose time to first token grows with the part of
the prompt it has not cached, as a real engine's prefix cache (vLLM's, SGLang's) makes it.

    python benchmarks/fleet_mock.py --port 9201 --name r1 --model agent-model

- **The prefix cache.** The prompt (its messages and tools, rendered canonically, so that
  every gateway's way of re-encoding the same request is the same prompt) is cut into blocks
  of `BLOCK_TOKENS` tokens (`CHARS_PER_TOKEN` characters each), each block's key the hash of
  all the text up to its end. The leading blocks found in an LRU of `--cache-tokens` tokens
  are cached; the rest must be computed (then they are cached too).
- **Prefill.** One prefill engine per server: a request waits its turn, then takes
  `--base-ttft` plus its uncached tokens at `--prefill-tps`. Load on a server therefore adds to
  its time to first token, and a miss costs every request queued behind it.
- **Decode.** The answer streams one token every `--decode-interval` seconds, in parallel
  with other requests. The last message decides its kind: one carrying `[answer]` gets text
  (a fixed text per request, so a continuation can be checked), any other a tool call; a
  request that offers no tools always gets text.
- **Continuation.** `continue_final_message: true` (or a trailing assistant message) continues
  the answer from the text given, as vLLM does; a prefix that is not the start of this
  request's answer gets `[continuation mismatch]`, which the benchmark counts as a failure.
- `usage` reports `prompt_tokens` and `prompt_tokens_details.cached_tokens`.
- `GET /stats`: requests, prompt and cached tokens (also for the agent sessions' turns
  alone: those offering tools), each request's time to first token here
  (queue and prefill), and the time integral of requests in flight (the load it carried); `/health`, `/v1/models`, `/get_model_info`,
  `/get_server_info` for the routers' start-up checks.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from typing import Any

BLOCK_TOKENS = 16
CHARS_PER_TOKEN = 2
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


def canonical_prompt(body: dict[str, Any]) -> str:
    """The prompt as the model server would see it, whatever JSON spelling the gateway chose
    (key order, spacing, empty fields): tools first (as chat templates put them in the system
    prompt), then each message's role, text and calls."""
    parts = []
    for tool in body.get("tools") or []:
        function = tool.get("function") or {}
        parts.append(
            json.dumps(
                [function.get("name"), function.get("description"), function.get("parameters")],
                sort_keys=True,
            )
        )
    for message in body.get("messages") or []:
        parts.append(f"<{message.get('role')}>{text_of(message.get('content'))}")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.dumps(
                    json.loads(function.get("arguments") or "{}"), sort_keys=True
                )
            except ValueError:
                arguments = str(function.get("arguments"))
            parts.append(f"<call>{function.get('name')}{arguments}")
    return "\n".join(parts)


def answer_text(last: str) -> str:
    """The text answer of a request whose last user or tool message says `last` (the client
    computes it too, to check what it got)."""
    seed = hashlib.blake2b(last.encode(), digest_size=4).hexdigest()
    words = " ".join(f"w{seed}{i}" for i in range(24))
    return f"Answer {seed}: {words}."


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.name = args.name
        self.models = args.model
        self.cache: OrderedDict[bytes, None] = OrderedDict()
        self.cache_blocks = max(1, args.cache_tokens // BLOCK_TOKENS)
        self.prefill = asyncio.Lock()
        self.base_ttft = args.base_ttft
        self.prefill_tps = args.prefill_tps
        self.decode_interval = args.decode_interval
        self.stats = {
            "requests": 0,
            "prompt_tokens": 0,
            "cached_tokens": 0,
            "agent_prompt_tokens": 0,
            "agent_cached_tokens": 0,
        }
        self.ttfts: list[float] = []
        """Each request's time to first token here: its wait for the prefill queue and its
        prefill (what routing decides; the gateway's own time is not in it)."""
        self.outstanding = 0
        self.integral = 0.0
        self.changed = time.monotonic()
        self.started = self.changed

    def _account(self, delta: int) -> None:
        now = time.monotonic()
        self.integral += self.outstanding * (now - self.changed)
        self.changed = now
        self.outstanding += delta

    def cached_prefix(self, prompt: str) -> tuple[int, int]:
        """(prompt tokens, cached tokens); the prompt's blocks are cached afterwards."""
        hasher = hashlib.blake2b(digest_size=16)
        cached = 0
        matching = True
        keys = []
        for start in range(0, len(prompt), BLOCK_CHARS):
            hasher.update(prompt[start : start + BLOCK_CHARS].encode())
            key = hasher.copy().digest()
            keys.append(key)
            if matching and key in self.cache:
                cached += 1
            else:
                matching = False
        for key in keys:
            self.cache[key] = None
            self.cache.move_to_end(key)
        while len(self.cache) > self.cache_blocks:
            self.cache.popitem(last=False)
        tokens = -(-len(prompt) // CHARS_PER_TOKEN)
        return tokens, min(tokens, cached * BLOCK_TOKENS)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"].removeprefix("/v1")
        if scope["method"] == "GET":
            await self.get(path, send)
        elif path == "/chat/completions":
            await self.chat(json.loads(raw), send)
        else:
            await respond(send, 404, {"error": {"message": f"no route {path}"}})

    async def get(self, path: str, send: Any) -> None:
        if path == "/stats":
            self._account(0)
            elapsed = max(1e-9, time.monotonic() - self.started)
            await respond(
                send,
                200,
                {
                    **self.stats,
                    "name": self.name,
                    "outstanding_integral": self.integral,
                    "mean_outstanding": self.integral / elapsed,
                    "elapsed": elapsed,
                    "ttfts": self.ttfts,
                },
            )
        elif path == "/models":
            data = [{"id": m, "object": "model", "owned_by": "mock"} for m in self.models]
            await respond(send, 200, {"object": "list", "data": data})
        elif path in ("/health", "/health_generate", "/liveness", "/readiness"):
            await respond(send, 200, {"status": "ok"})
        elif path in ("/get_model_info", "/model_info"):
            await respond(send, 200, {"model_path": self.models[0], "is_generation": True})
        elif path == "/get_server_info":
            await respond(send, 200, {"model_path": self.models[0], "version": "mock"})
        else:
            await respond(send, 404, {"error": {"message": f"no route {path}"}})

    async def chat(self, body: dict[str, Any], send: Any) -> None:
        self._account(+1)
        try:
            await self._chat(body, send)
        finally:
            self._account(-1)

    async def _chat(self, body: dict[str, Any], send: Any) -> None:
        messages = body.get("messages") or []
        model = body.get("model") or self.models[0]
        prefix = ""
        if messages and messages[-1].get("role") == "assistant":
            prefix = str(messages[-1].get("content") or "")
        tokens, cached = self.cached_prefix(canonical_prompt(body))
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += tokens
        self.stats["cached_tokens"] += cached
        if body.get("tools"):  # an agent session's turn (the one-shots offer no tools)
            self.stats["agent_prompt_tokens"] += tokens
            self.stats["agent_cached_tokens"] += cached
        arrived = time.monotonic()
        async with self.prefill:
            await asyncio.sleep(self.base_ttft + (tokens - cached) / self.prefill_tps)
        self.ttfts.append(time.monotonic() - arrived)
        said = [text_of(m.get("content")) for m in messages if m.get("role") != "assistant"]
        last = said[-1] if said else ""
        # a request offering no tools is answered in text (the one-shots, `make fleet`'s demo)
        wants_text = "[answer]" in last or not body.get("tools")
        usage = {
            "prompt_tokens": tokens,
            "completion_tokens": 0,
            "total_tokens": tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        if wants_text or prefix:
            text = answer_text(last)
            if prefix:
                text = (
                    text[len(prefix) :] if text.startswith(prefix) else " [continuation mismatch]"
                )
            pieces = [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]
            deltas = [{"content": piece} for piece in pieces]
            finish = "stop"
        else:
            step = sum(1 for m in messages if m.get("role") == "tool")
            arguments = json.dumps({"step": step, "path": f"src/module_{step}.py"})
            call_id = "call_" + hashlib.blake2b(arguments.encode(), digest_size=6).hexdigest()
            head = {"index": 0, "id": call_id, "type": "function"}
            head["function"] = {"name": "run_step", "arguments": ""}
            cut = -(-len(arguments) // 6)
            deltas = [{"tool_calls": [head]}] + [
                {"tool_calls": [{"index": 0, "function": {"arguments": arguments[i : i + cut]}}]}
                for i in range(0, len(arguments), cut)
            ]
            pieces = [arguments]
            finish = "tool_calls"
        usage["completion_tokens"] = len(deltas)
        usage["total_tokens"] = tokens + len(deltas)
        meta = {"id": "chatcmpl-" + self.name, "created": int(time.time()), "model": model}
        if not body.get("stream"):
            await asyncio.sleep(self.decode_interval * len(deltas))
            message: dict[str, Any] = {"role": "assistant", "content": None}
            if finish == "stop":
                message["content"] = "".join(pieces)
            else:
                call = dict(deltas[0]["tool_calls"][0])
                call["function"] = {"name": "run_step", "arguments": pieces[0]}
                call.pop("index", None)
                message["tool_calls"] = [call]
            choice = {"index": 0, "message": message, "finish_reason": finish}
            answer = {**meta, "object": "chat.completion", "choices": [choice], "usage": usage}
            await respond(send, 200, answer)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        chunk = {**meta, "object": "chat.completion.chunk"}
        first = {"role": "assistant", "content": ""}
        frames = [{**chunk, "choices": [{"index": 0, "delta": first, "finish_reason": None}]}]
        for delta in deltas:
            frames.append(
                {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            )
        frames.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        frames.append({**chunk, "choices": [], "usage": usage})
        for n, frame in enumerate(frames):
            if 1 < n <= len(deltas):
                await asyncio.sleep(self.decode_interval)
            data = b"data: " + json.dumps(frame).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def respond(send: Any, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="mock")
    parser.add_argument("--model", action="append", default=None)
    parser.add_argument("--cache-tokens", type=int, default=100_000)
    parser.add_argument("--prefill-tps", type=float, default=50_000.0)
    parser.add_argument("--base-ttft", type=float, default=0.01)
    parser.add_argument("--decode-interval", type=float, default=0.004)
    args = parser.parse_args()
    args.model = args.model or ["agent-model"]
    import uvicorn

    uvicorn.run(
        Server(args),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=60,
    )


if __name__ == "__main__":
    main()
