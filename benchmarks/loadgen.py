"""The benchmark's load generator: a separate process from the gateways and the mock.

Latency work (sequential, one keep-alive connection per target) uses a minimal blocking
HTTP/1.1 client over a raw socket, so the client adds a few microseconds, the same for every
target. Throughput uses `wrk` when the harness found it, else the asyncio client below (uvloop
when importable). Stdlib only (plus optional uvloop). Every subcommand writes one JSON document.

    python benchmarks/loadgen.py sequential --spec spec.json --out out.json
    python benchmarks/loadgen.py throughput --url http://127.0.0.1:P/v1/chat/completions \
        --body body.json --concurrency 64 --duration 20 --out out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import select
import socket
import sys
import time
from typing import Any
from urllib.parse import urlsplit

perf = time.perf_counter_ns


# -- a minimal blocking HTTP/1.1 client -----------------------------------------------------


class HTTPError(Exception):
    pass


class RawClient:
    """One keep-alive connection; `post` returns timings in nanoseconds and the decoded body."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.timeout = timeout
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        return sock

    def _closed_by_peer(self) -> bool:
        assert self.sock is not None
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return False
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request_bytes(self, body: bytes, extra_headers: str = "") -> bytes:
        # a path's own key (extra_headers) replaces the placeholder one
        auth = (
            ""
            if "authorization:" in extra_headers.lower()
            else "authorization: Bearer sk-bench\r\n"
        )
        return (
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"content-type: application/json\r\naccept: */*\r\n{auth}"
            f"{extra_headers}content-length: {len(body)}\r\n\r\n"
        ).encode() + body

    def post(self, request: bytes, marker: bytes | None = None) -> tuple[int, int, int, int, bytes]:
        """Send a pre-encoded request. Returns (status, first_body_byte_ns, marker_ns, end_ns,
        body), times relative to the send. `marker_ns` is when `marker` first appeared in the
        body (0 if never). A keep-alive connection the server closed while idle (uvicorn does
        after 5 s) is replaced before the clock starts, as any HTTP client would."""
        sock = self.sock if self.sock is not None and not self._closed_by_peer() else None
        if sock is None:
            self.close()
            sock = self._connect()
        recv = sock.recv
        start = perf()
        try:
            sock.sendall(request)
            buf = b""
            while True:
                data = recv(262144)
                if not data:
                    raise HTTPError("connection closed before the response head")
                buf += data
                head_end = buf.find(b"\r\n\r\n")
                if head_end >= 0:
                    break
            head = buf[:head_end].decode("latin-1")
            rest = buf[head_end + 4 :]
            status = int(head.split(" ", 2)[1])
            lower = head.lower()
            first = perf() if rest else 0
            marker_at = 0
            if marker is not None and rest and marker in rest:
                marker_at = first
            if "transfer-encoding: chunked" in lower:
                body, first, marker_at = self._chunked(sock, rest, first, marker, marker_at)
                close = "connection: close" in lower
            else:
                length = -1
                for line in lower.split("\r\n"):
                    if line.startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if length < 0:  # read to close
                    parts = [rest]
                    while True:
                        data = recv(262144)
                        if not data:
                            break
                        if not first:
                            first = perf()
                        parts.append(data)
                    body = b"".join(parts)
                    close = True
                else:
                    parts = [rest]
                    got = len(rest)
                    while got < length:
                        data = recv(262144)
                        if not data:
                            raise HTTPError("connection closed mid-body")
                        if not first:
                            first = perf()
                        if marker is not None and not marker_at and marker in data:
                            marker_at = perf()
                        parts.append(data)
                        got += len(data)
                    body = b"".join(parts)
                    close = "connection: close" in lower
                if marker is not None and not marker_at and marker in body:
                    marker_at = perf()
            end = perf()
        except Exception:
            self.close()
            raise
        if close:
            self.close()
        rel = lambda t: t - start if t else 0  # noqa: E731
        return status, rel(first), rel(marker_at), end - start, body

    def _chunked(
        self, sock: socket.socket, buf: bytes, first: int, marker: bytes | None, marker_at: int
    ) -> tuple[bytes, int, int]:
        """Read a chunked body to its end; the first *non-empty* chunk marks the first byte."""
        out: list[bytes] = []
        pos = 0
        first = 0  # the head's arrival is not the first body byte; a data chunk is
        recv = sock.recv
        while True:
            eol = buf.find(b"\r\n", pos)
            while eol < 0:
                data = recv(262144)
                if not data:
                    raise HTTPError("connection closed mid-chunk")
                buf = buf[pos:] + data
                pos = 0
                eol = buf.find(b"\r\n")
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            need = eol + 2 + size + 2
            while len(buf) < need:
                data = recv(262144)
                if not data:
                    raise HTTPError("connection closed mid-chunk")
                buf += data
            if size == 0:
                return b"".join(out), first, marker_at
            chunk = buf[eol + 2 : eol + 2 + size]
            if not first:
                first = perf()
            if marker is not None and not marker_at and marker in chunk:
                marker_at = perf()
            out.append(chunk)
            pos = need
            if pos > 1 << 20:
                buf = buf[pos:]
                pos = 0


# -- validation of what came back -----------------------------------------------------------


def sse_data(body: bytes) -> list[str]:
    events = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            events.append(b"\n".join(data).decode())
    return events


def tool_of(expected_args: str) -> str:
    """The tool the mock's call names: its long stream writes a file (a path and a content,
    `mock_upstream.LONG_TOOL_NAME`), its short answers ask for the weather."""
    return "write_file" if "path" in json.loads(expected_args) else "get_weather"


def check_chat(body: bytes, stream: bool, expected_args: str) -> tuple[bool, str, int]:
    """(ok, why-not, chunks): one tool call of `tool_of(expected_args)` with exactly the
    expected arguments (compared as JSON), finish_reason tool_calls."""
    try:
        if not stream:
            doc = json.loads(body)
            choice = doc["choices"][0]
            calls = choice["message"].get("tool_calls") or []
            if len(calls) != 1:
                return False, f"{len(calls)} tool calls", 0
            fn = calls[0]["function"]
            if fn["name"] != tool_of(expected_args):
                return False, f"name {fn['name']!r}", 0
            if json.loads(fn["arguments"]) != json.loads(expected_args):
                return False, "arguments differ", 0
            if choice.get("finish_reason") != "tool_calls":
                return False, f"finish_reason {choice.get('finish_reason')!r}", 0
            return True, "", 0
        events = sse_data(body)
        if not events or events[-1] != "[DONE]":
            return False, "no [DONE]", len(events)
        names: dict[int, str] = {}
        args: dict[int, list[str]] = {}
        finish = None
        chunks = 0
        for data in events[:-1]:
            doc = json.loads(data)
            if "error" in doc:
                return False, f"error event: {str(doc['error'])[:200]}", chunks
            chunks += 1
            for choice in doc.get("choices") or []:
                delta = choice.get("delta") or {}
                for call in delta.get("tool_calls") or []:
                    index = call.get("index", 0)
                    fn = call.get("function") or {}
                    if fn.get("name"):
                        names[index] = fn["name"]
                    if fn.get("arguments"):
                        args.setdefault(index, []).append(fn["arguments"])
                finish = choice.get("finish_reason") or finish
        if list(names.values()) != [tool_of(expected_args)]:
            return False, f"calls {names}", chunks
        if json.loads("".join(args.get(next(iter(names)), []))) != json.loads(expected_args):
            return False, "streamed arguments differ", chunks
        if finish != "tool_calls":
            return False, f"finish_reason {finish!r}", chunks
        return True, "", chunks
    except Exception as exc:  # a malformed body is a failed check, not a crashed benchmark
        return False, f"{type(exc).__name__}: {exc}"[:200], 0


def check_responses(body: bytes, stream: bool, expected_args: str) -> tuple[bool, str, int]:
    try:
        if stream:
            events = [json.loads(d) for d in sse_data(body) if d != "[DONE]"]
            kinds = [e.get("type") for e in events]
            if "response.completed" not in kinds:
                return False, f"no response.completed (last: {kinds[-1:]})", len(events)
            doc = next(e for e in events if e.get("type") == "response.completed")["response"]
        else:
            doc = json.loads(body)
            events = []
        calls = [o for o in doc.get("output", []) if o.get("type") == "function_call"]
        if len(calls) != 1 or calls[0].get("name") != tool_of(expected_args):
            return False, f"function calls {[c.get('name') for c in calls]}", len(events)
        if json.loads(calls[0]["arguments"]) != json.loads(expected_args):
            return False, "arguments differ", len(events)
        return True, "", len(events)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200], 0


def check_messages(body: bytes, stream: bool, expected_args: str) -> tuple[bool, str, int]:
    """Anthropic's Messages answer: one `tool_use` block of `tool_of(expected_args)` whose
    input is the expected arguments (streaming: the concatenated `input_json_delta`s),
    stop_reason tool_use."""
    try:
        if not stream:
            doc = json.loads(body)
            uses = [b for b in doc.get("content", []) if b.get("type") == "tool_use"]
            if len(uses) != 1 or uses[0].get("name") != tool_of(expected_args):
                return False, f"tool_use blocks {[b.get('name') for b in uses]}", 0
            if uses[0]["input"] != json.loads(expected_args):
                return False, "input differs", 0
            if doc.get("stop_reason") != "tool_use":
                return False, f"stop_reason {doc.get('stop_reason')!r}", 0
            return True, "", 0
        events = [json.loads(d) for d in sse_data(body)]
        kinds = [e.get("type") for e in events]
        if not kinds or kinds[-1] != "message_stop":
            return False, f"no message_stop (last: {kinds[-1:]})", len(events)
        # as the SDK builds a tool_use block: its input from the concatenated partial_json
        # pieces, or the start's `input` when no piece came
        names: list[str] = []
        inputs: dict[int, Any] = {}
        pieces: dict[int, list[str]] = {}
        for e in events:
            if (
                e.get("type") == "content_block_start"
                and e["content_block"].get("type") == "tool_use"
            ):
                names.append(e["content_block"].get("name"))
                inputs[e["index"]] = e["content_block"].get("input")
            elif e.get("type") == "content_block_delta" and "partial_json" in e["delta"]:
                pieces.setdefault(e["index"], []).append(e["delta"]["partial_json"])
        for index, parts in pieces.items():
            inputs[index] = json.loads("".join(parts)) if "".join(parts) else {}
        stop = next(
            (e["delta"].get("stop_reason") for e in events if e.get("type") == "message_delta"),
            None,
        )
        if names != [tool_of(expected_args)]:
            return False, f"tool_use blocks {names}", len(events)
        if list(inputs.values()) != [json.loads(expected_args)]:
            return False, "streamed input differs", len(events)
        if stop != "tool_use":
            return False, f"stop_reason {stop!r}", len(events)
        return True, "", len(events)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200], 0


def check_gemini(body: bytes, stream: bool, expected_args: str) -> tuple[bool, str, int]:
    """Gemini's answer: one `functionCall` part of `tool_of(expected_args)` whose `args` are
    the expected arguments, `finishReason` STOP (streaming, `alt=sse`: over every chunk, as the
    SDKs read them; an error object after the stream opened fails it)."""
    try:
        # an error object after the stream opened is no `data:` event: the call and the
        # finishReason it would have carried are missing, so the check fails
        docs = [json.loads(d) for d in sse_data(body)] if stream else [json.loads(body)]
        calls = []
        finish = None
        for doc in docs:
            if "error" in doc:
                return False, f"error: {str(doc['error'])[:200]}", len(docs)
            candidate = (doc.get("candidates") or [{}])[0]
            parts = (candidate.get("content") or {}).get("parts") or []
            calls += [p["functionCall"] for p in parts if "functionCall" in p]
            finish = candidate.get("finishReason") or finish
        if [c.get("name") for c in calls] != [tool_of(expected_args)]:
            return False, f"function calls {[c.get('name') for c in calls]}", len(docs)
        if calls[0].get("args") != json.loads(expected_args):
            return False, "args differ", len(docs)
        if finish != "STOP":
            return False, f"finishReason {finish!r}", len(docs)
        return True, "", len(docs)
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200], 0


CHECKS = {
    "chat": check_chat,
    "responses": check_responses,
    "messages": check_messages,
    "gemini": check_gemini,
}
MARKERS = {
    "chat": b'"tool_calls"',
    "responses": b"function_call",
    "messages": b'"tool_use"',
    "gemini": b'"functionCall"',
}


# -- sequential runs (workloads a, b, d, g) -------------------------------------------------


def sequential(spec: dict[str, Any]) -> dict[str, Any]:
    """spec: {"targets": {name: url}, "body": {...}, "stream": bool, "kind": "chat"|"responses",
    "expected_args": str, "warmup": n, "requests": n, "models": {name: model}, "block": n}.
    Requests go to the targets in blocks of `block` (1: strictly round-robin), the targets
    rotating, one keep-alive connection each; warm-up requests are not recorded."""
    targets: dict[str, str] = spec["targets"]
    stream = bool(spec["stream"])
    # `kinds` / `bodies`: per-target overrides (the Messages workload's direct baseline is a
    # chat completion while the gateways take an Anthropic request)
    kinds = {name: spec.get("kinds", {}).get(name, spec["kind"]) for name in targets}
    clients = {name: RawClient(url) for name, url in targets.items()}
    requests = {}
    for name, client in clients.items():
        body = dict(spec.get("bodies", {}).get(name, spec["body"]))
        model = spec.get("models", {}).get(name, body.get("model"))
        if model is not None:  # Gemini's requests name their model in the path, not the body
            body["model"] = model
        extra = "".join(f"{k}: {v}\r\n" for k, v in spec.get("headers", {}).get(name, {}).items())
        requests[name] = client.request_bytes(json.dumps(body).encode(), extra)
    results: dict[str, dict[str, Any]] = {
        name: {
            "total_us": [],
            "ttfb_us": [],
            "marker_us": [],
            "errors": 0,
            "bad": 0,
            "why": "",
            "chunks": 0,
        }
        for name in targets
    }
    order = list(targets)
    block = max(1, int(spec.get("block", 1)))
    schedule = []  # (phase, target) in order: blocks of `block` requests, targets rotating
    for phase, count in (("warmup", spec["warmup"]), ("measure", spec["requests"])):
        for round_no, start in enumerate(range(0, count, block)):
            names = (
                order[round_no % len(order) :] + order[: round_no % len(order)]
            )  # who goes first rotates
            for name in names:
                schedule += [(phase, name)] * min(block, count - start)
    for phase, name in schedule:
        res = results[name]
        try:
            status, first, marker_at, total, body = clients[name].post(
                requests[name], MARKERS[kinds[name]]
            )
        except (OSError, HTTPError) as exc:
            if phase == "measure":
                res["errors"] += 1
                res["why"] = res["why"] or f"{type(exc).__name__}: {exc}"
            continue
        if phase == "warmup":
            continue
        if status != 200:
            res["errors"] += 1
            res["why"] = res["why"] or f"HTTP {status}: {body[:300].decode(errors='replace')}"
            continue
        ok, why, chunks = CHECKS[kinds[name]](body, stream, spec["expected_args"])
        if not ok:
            res["bad"] += 1
            res["why"] = res["why"] or why
        res["chunks"] = max(res["chunks"], chunks)
        res["total_us"].append(total / 1000)
        res["ttfb_us"].append(first / 1000)
        res["marker_us"].append(marker_at / 1000)
    for client in clients.values():
        client.close()
    return results


# -- throughput (workload c) without wrk ----------------------------------------------------


class _Conn(asyncio.Protocol):
    def __init__(self, runner: _Throughput) -> None:
        self.runner = runner
        self.buf = b""
        self.need = -1
        self.start = 0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send()

    def send(self) -> None:
        if perf() >= self.runner.deadline:
            if not self.done.done():
                self.done.set_result(None)
            assert self.transport is not None
            self.transport.close()
            return
        self.buf = b""
        self.need = -1
        self.start = perf()
        assert self.transport is not None
        self.transport.write(self.runner.request)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        buf = self.buf
        if self.need < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = buf[:end].lower()
            self.status = int(head[9:12])
            at = head.find(b"content-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at)
                self.need = end + 4 + int(head[at + 15 : stop if stop >= 0 else len(head)])
            else:
                self.need = 0  # chunked: complete at the terminating chunk
        if (self.need and len(buf) >= self.need) or (
            not self.need and buf.endswith(b"\r\n0\r\n\r\n")
        ):
            self.runner.record(self.status, perf() - self.start)
            self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            if perf() < self.runner.deadline:
                self.runner.errors += 1
            self.done.set_result(None)


class _Throughput:
    def __init__(self, url: str, body: bytes, duration: float, extra_headers: str = "") -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.request = RawClient(url).request_bytes(body, extra_headers)
        self.duration = duration
        self.deadline = 0
        self.ok = 0
        self.errors = 0
        self.latencies: list[int] = []

    def record(self, status: int, ns: int) -> None:
        if status == 200:
            self.ok += 1
            self.latencies.append(ns)
        else:
            self.errors += 1

    async def run(self, concurrency: int) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.deadline = perf() + int(self.duration * 1e9)
        start = perf()
        conns = []
        for _ in range(concurrency):
            try:
                _, proto = await loop.create_connection(lambda: _Conn(self), self.host, self.port)
                conns.append(proto)
            except OSError:
                self.errors += 1
        await asyncio.wait([c.done for c in conns], timeout=self.duration + 30)
        elapsed = (perf() - start) / 1e9
        lat = sorted(self.latencies)
        pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * len(lat)))] / 1000 if lat else 0.0  # noqa: E731
        return {
            "tool": "python-asyncio",
            "requests": self.ok,
            "errors": self.errors,
            "seconds": elapsed,
            "rps": self.ok / elapsed if elapsed else 0.0,
            "p50_us": pct(50),
            "p99_us": pct(99),
        }


def throughput(
    url: str, body: bytes, concurrency: int, duration: float, extra_headers: str = ""
) -> dict[str, Any]:
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_Throughput(url, body, duration, extra_headers).run(concurrency))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    seq = sub.add_parser("sequential")
    seq.add_argument("--spec", required=True)
    seq.add_argument("--out", required=True)
    thr = sub.add_parser("throughput")
    thr.add_argument("--url", required=True)
    thr.add_argument("--body", required=True)
    thr.add_argument("--concurrency", type=int, required=True)
    thr.add_argument("--duration", type=float, required=True)
    thr.add_argument("--out", required=True)
    thr.add_argument("--header", action="append", default=[], help="NAME: VALUE, repeatable")
    args = parser.parse_args()
    if args.cmd == "sequential":
        with open(args.spec) as f:
            result = sequential(json.load(f))
    else:
        with open(args.body, "rb") as f:
            extra = "".join(f"{h}\r\n" for h in args.header)
            result = throughput(args.url, f.read(), args.concurrency, args.duration, extra)
    with open(args.out, "w") as f:
        json.dump(result, f)
    sys.exit(0)


if __name__ == "__main__":
    main()
