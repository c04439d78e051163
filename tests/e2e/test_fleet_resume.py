"""A cut answer continued on another replica, with a real model server: llama-cpp-python
serving SmolLM2-135M (toolwire's managed server, `upstream/llama_child.py`, which prefills a
trailing assistant message as llama.cpp's server does), behind a real `toolwire serve` routing
over two upstreams: a proxy that cuts every stream after a few tokens (the replica that dies
mid-answer) and the model server itself.

The client sees one answer: the text the cut replica sent, then the model going on from it
(greedy decoding), never a restart. The words after the cut need not be those of the uncut
answer: the prefix is sent back as text and tokenized anew, which can steer a small model
onto another path; what matters is that it goes on from the text the client already has."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from tests.processes import free_port, toolwire_process, wait_until_up

pytest.importorskip("llama_cpp", reason="needs the local extra: pip install 'toolwire[local]'")
pytestmark = pytest.mark.e2e

CUT_AFTER = 12
"""Content chunks (tokens) the cutting replica relays before it drops the connection."""
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Write three sentences about the sea."},
]
ASK = {"model": "smollm2", "messages": MESSAGES, "temperature": 0, "max_tokens": 60}


class CuttingProxy:
    """Relays to the model server; every streamed answer is cut after `CUT_AFTER` content
    chunks (the connection dropped mid-stream, as a dying server does)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.cut = 0
        self.port = free_port()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        url = self.target + scope["path"].removeprefix("/v1")
        async with httpx.AsyncClient(timeout=120) as client:
            if scope["method"] == "GET":
                answer = await client.get(url)
                await send({"type": "http.response.start", "status": answer.status_code})
                await send({"type": "http.response.body", "body": answer.content})
                return
            headers = {"content-type": "application/json"}
            async with client.stream("POST", url, content=body, headers=headers) as answer:
                await send(
                    {
                        "type": "http.response.start",
                        "status": answer.status_code,
                        "headers": [(b"content-type", b"text/event-stream")],
                    }
                )
                relayed = 0
                async for line in answer.aiter_lines():
                    relayed += _has_content(line)
                    frame = (line + "\n").encode()
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                    if relayed >= CUT_AFTER and line == "":
                        self.cut += 1
                        raise ConnectionResetError("cut mid-answer")  # drops the connection

    def serve(self) -> Iterator[str]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        server = uvicorn.Server(uvicorn.Config(self, log_level="critical", lifespan="off"))
        thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
        thread.start()
        try:
            yield f"http://127.0.0.1:{self.port}/v1"
        finally:
            server.should_exit = True
            thread.join(10)


@pytest.fixture(scope="module")
def model_server() -> Iterator[str]:
    from toolwire.upstream.local_llama import bundled_model_path

    port = free_port()
    args = [sys.executable, "-m", "toolwire.upstream.llama_child", "--model"]
    args += [str(bundled_model_path()), "--model-alias", "smollm2", "--port", str(port)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v1/models", process, timeout=120)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)


def _has_content(line: str) -> bool:
    if not line.startswith("data: {"):
        return False
    choices = orjson.loads(line[6:]).get("choices") or []
    return any(choice["delta"].get("content") for choice in choices)


def streamed_text(url: str, body: dict[str, Any]) -> tuple[list[str], bool]:
    """The content pieces of a streamed chat completion, and whether it ended with [DONE]."""
    pieces: list[str] = []
    done = False
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=120) as answer:
        assert answer.status_code == 200, answer.read()
        for line in answer.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunk = orjson.loads(line[6:])
                assert "error" not in chunk, chunk
                for choice in chunk.get("choices") or []:
                    if choice["delta"].get("content"):
                        pieces.append(choice["delta"]["content"])
    return pieces, done


def test_a_cut_answer_is_continued_by_the_real_model_on_the_other_replica(
    model_server: str, tmp_path: Path
) -> None:
    uncut, _ = streamed_text(model_server + "/chat/completions", ASK)
    assert len(uncut) > CUT_AFTER + 5, uncut
    prefix = "".join(uncut[:CUT_AFTER])
    proxy = CuttingProxy(model_server)
    serving = proxy.serve()
    proxy_url = next(serving)
    try:
        config = tmp_path / "toolwire.yaml"
        config.write_text(  # every new session hashes to the heavy, cutting one
            "upstreams:\n"
            f"  - url: {proxy_url}\n    name: cutting\n    weight: 1000\n"
            f"  - url: {model_server}\n    name: llama\n    resume: prefill\n"
            "upstream_probe_seconds: 0\n"
        )
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        args = ["serve", "--config", str(config), "--port", str(port)]
        args += ["--db", f"sqlite:///{tmp_path / 'db.sqlite'}"]
        with toolwire_process(*args, health=base + "/health"):
            pieces, done = streamed_text(base + "/v1/chat/completions", ASK)
            metrics = httpx.get(base + "/metrics").text
    finally:
        next(serving, None)
    text = "".join(pieces)
    assert proxy.cut == 1 and done
    assert text.startswith(prefix)  # what the cut replica had sent, unchanged
    rest = text[len(prefix) :]
    assert rest.strip(), "nothing was added after the cut"
    assert not rest.lstrip().startswith(prefix.strip()[:12]), "the answer started over"
    # the model went on mid-sentence and mid-list (greedy: "…that exists" + " beneath the
    # waves.\n2. …"), where a fresh turn would start the list over at "1."
    assert rest[0] == " " and rest.lstrip()[0].islower(), rest
    assert "2." in rest and "1." not in rest, rest
    assert 'toolwire_upstream_routed_total{reason="resume",upstream="llama"} 1.0' in metrics
