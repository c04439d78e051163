"""Issue 17, end to end against a real `toolwire serve`: the metrics move after a scripted run
with a repaired stream, a leak retry, an upstream retry, a tool error and an approval; spans
reach a local OTLP receiver with the GenAI attributes and the caller's trace context; request
ids and log lines; and the `/ui` page in a real headless Chromium lists a run, shows its
timeline with the repair, and continues the run when its approval is clicked."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.integration.cdp import CHROMIUM, Browser
from tests.integration.conftest import Gateway, running_gateway
from toolwire.testing import Body, Chunks, Reply

STREAMS = Path(__file__).parent.parent / "data" / "streams"
LEAKED = 'I will check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class OtlpReceiver:
    """A tiny OTLP/HTTP receiver on loopback: keeps every span POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, predicate: Any, timeout: float = 10) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.spans):
                return self.spans
            time.sleep(0.1)
        raise AssertionError(f"spans never arrived: {[s.name for s in self.spans]}")


def attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = (
            list(v.string_value for v in value.array_value.values)
            if kind == "array_value"
            else getattr(value, kind)
        )
    return out


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture(scope="module")
def og(tmp_path_factory: pytest.TempPathFactory, otlp: OtlpReceiver) -> Iterator[Gateway]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "TOOLWIRE_TRACE_CONTENT": "",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        extra = ("--tool", "tests.integration.observe_tools:ALL", "--log-format", "json")
        with running_gateway(tmp_path_factory.mktemp("obs") / "toolwire.db", extra) as gateway:
            yield gateway
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def scrape(gateway: Gateway) -> dict[str, float]:
    text = httpx.get(gateway.base_url.removesuffix("/v1") + "/metrics").text
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def metric(values: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the series of `name` whose labels include `labels`."""
    total = 0.0
    for series, value in values.items():
        base, _, rest = series.partition("{")
        if base != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if all(found.get(k) == v for k, v in labels.items()):
            total += value
    return total


def corpus_turn(name: str) -> Chunks:
    case = json.loads((STREAMS / name).read_text(encoding="utf-8"))
    return Chunks(case["turns"][0]["chunks"])


def whole_call(name: str, arguments: dict[str, Any]) -> Chunks:
    """One delta carrying the whole call (a `whole_call_one_delta` repair)."""
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_whole1",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    return Chunks([chunk])


def test_metrics_move_after_a_scripted_run(og: Gateway, otlp: OtlpReceiver) -> None:
    og.reset()
    before = scrape(og)
    client = og.client
    # a repaired stream (LMDeploy's id churn), then a leak retried, then a tool error
    og.upstream.add(
        Body({"error": {"message": "busy"}}, status=503, headers={"retry-after": "0"}),
        corpus_turn("23_lmdeploy_id_churn.json"),
        Reply(text=LEAKED),
        Reply(tool_calls=[("flaky_lookup", {"key": "k1"})]),
        Reply(text="All done.", usage={"prompt_tokens": 11, "completion_tokens": 7}),
    )
    response = client.responses.create(
        model="scripted-model",
        input="go",
        extra_headers={"traceparent": f"00-{TRACE_ID}-{PARENT}-01", "x-request-id": "req-obs-1"},
    )
    assert response.status == "completed", response
    # an approval: requested, then approved
    og.upstream.add(Reply(tool_calls=[("delete_file", {"path": "old.txt"})]))
    asking = client.responses.create(model="scripted-model", input="clean up")
    request = next(i for i in asking.output if i.type == "mcp_approval_request")
    og.upstream.add(Reply(text="Deleted."))
    done = client.responses.create(
        model="scripted-model",
        previous_response_id=asking.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
        ],
    )
    assert done.status == "completed"

    after = scrape(og)

    def moved(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert moved("toolwire_stream_repairs_total", kind="id_churn") == 1
    assert moved("toolwire_leaks_total", format="hermes", action="retry") == 1
    assert moved("toolwire_leaks_total", action="detected") == 1
    assert moved("toolwire_upstream_retries_total", cause="http_503") == 1
    assert moved("toolwire_tool_calls_total", tool="flaky_lookup", status="error") == 1
    assert moved("toolwire_tool_calls_total", tool="delete_file", source="python", status="ok") == 1
    assert moved("toolwire_approvals_total", decision="requested") == 1
    assert moved("toolwire_approvals_total", decision="approved") == 1
    assert moved("toolwire_upstream_calls_total", outcome="ok") == 6
    assert moved("toolwire_upstream_call_duration_seconds_count") == 6
    assert moved("toolwire_upstream_time_to_first_token_seconds_count") == 6
    assert moved("toolwire_tokens_total", direction="input") >= 11
    assert moved("toolwire_runs_total", reason="awaiting_approval") == 1
    assert (
        moved("toolwire_http_requests_total", route="/v1/responses", method="POST", status="200")
        == 3
    )
    assert moved("toolwire_http_request_duration_seconds_count", route="/v1/responses") == 3
    assert moved("toolwire_http_time_to_first_byte_seconds_count", route="/v1/responses") == 3

    # traces: the run's span continues the caller's trace; model and tool calls are children
    def arrived(spans: list[Any]) -> bool:
        names = {s.name for s in spans if s.trace_id.hex() == TRACE_ID}
        return {"invoke_agent toolwire", "execute_tool flaky_lookup"} <= names

    spans = otlp.wait(arrived)  # the run's span ends last and may come in a later batch
    mine = [s for s in spans if s.trace_id.hex() == TRACE_ID]
    run = next(s for s in mine if s.name == "invoke_agent toolwire")
    assert run.parent_span_id.hex() == PARENT
    assert attributes(run)["gen_ai.operation.name"] == "invoke_agent"
    assert attributes(run)["gen_ai.response.id"] == response.id
    chats = [s for s in mine if s.name == "chat scripted-model"]
    assert len(chats) == 4 and all(s.parent_span_id == run.span_id for s in chats)
    last = attributes(chats[-1])
    assert last["gen_ai.operation.name"] == "chat"
    assert last["gen_ai.request.model"] == "scripted-model"
    assert last["gen_ai.usage.input_tokens"] == 11 and last["gen_ai.usage.output_tokens"] == 7
    assert "gen_ai.output.messages" not in last  # no content unless TOOLWIRE_TRACE_CONTENT=1
    assert any(e.name == "toolwire.repair" for s in chats for e in s.events)
    tool = next(s for s in mine if s.name == "execute_tool flaky_lookup")
    tool_attributes = attributes(tool)
    assert tool_attributes["gen_ai.tool.name"] == "flaky_lookup"
    assert tool_attributes["gen_ai.tool.call.id"]
    assert "gen_ai.tool.call.arguments" not in tool_attributes
    assert tool.status.code == 2  # ERROR
    # the upstream got the model call's trace context
    parents = [r.headers.get("traceparent", "") for r in og.upstream.chat_requests]
    assert sum(TRACE_ID in p for p in parents) == 5  # the 503, then four model calls


def test_request_ids_and_log_lines(og: Gateway) -> None:
    base = og.base_url.removesuffix("/v1")
    kept = httpx.get(base + "/health", headers={"x-request-id": "abc-123.x"})
    assert kept.headers["x-request-id"] == "abc-123.x"
    made = httpx.get(base + "/health", headers={"x-request-id": "bad id\twith junk"})
    assert re.fullmatch(r"req_[0-9a-f]{24}", made.headers["x-request-id"])
    assert httpx.get(base + "/v1/models").headers["x-request-id"].startswith("req_")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_ui_page_lists_a_run_and_its_approval_continues_it(
    og: Gateway, tmp_path_factory: pytest.TempPathFactory
) -> None:
    og.reset()
    og.upstream.add(whole_call("delete_file", {"path": "notes.txt"}))
    asking = og.client.responses.create(model="scripted-model", input="remove notes.txt")
    assert any(i.type == "mcp_approval_request" for i in asking.output)
    og.upstream.add(Reply(text="notes.txt is gone."))
    base = og.base_url.removesuffix("/v1")
    browser = Browser()
    shots = tmp_path_factory.mktemp("ui")
    try:
        browser.navigate(base + "/ui#/responses")
        browser.evaluate(
            "document.getElementById('api-key').value = 'sk-ui-test';"
            "document.getElementById('key-form').requestSubmit(); true"
        )
        assert browser.evaluate("sessionStorage.getItem('toolwire.apiKey')") == "sk-ui-test"
        row = f"#responses tr[data-id='{asking.id}']"
        browser.wait_for(f'!!document.querySelector("{row}")')
        browser.evaluate(f'document.querySelector("{row}").click(); true')
        browser.wait_for("document.querySelectorAll('[data-testid=timeline] li').length > 0")
        kinds = browser.evaluate(
            "[...document.querySelectorAll('[data-testid=timeline] li')].map(li => li.dataset.type)"
        )
        assert kinds[:2] == ["run_started", "model_call"]
        assert "repair" in kinds and "approval_requested" in kinds and kinds[-1] == "finished"
        text = browser.evaluate("document.querySelector('[data-testid=timeline]').innerText")
        assert "whole_call_one_delta" in text and "notes.txt" in text
        browser.screenshot(shots / "timeline.png")
        # approve it from the timeline: the page continues the run through /v1/responses
        browser.evaluate("document.querySelector('#detail button.approve').click(); true")
        browser.wait_for(
            "[...document.querySelectorAll('[data-testid=timeline] li')]"
            ".some(li => li.dataset.type === 'tool_call')"
        )
        browser.wait_for(
            "document.querySelector('#detail h2') &&"
            f" document.querySelector('#detail h2').textContent !== '{asking.id}'"
        )
        text = browser.evaluate("document.querySelector('[data-testid=detail]').innerText")
        assert "deleted notes.txt" in text and "completed" in text
        browser.screenshot(shots / "continued.png")
        print(f"screenshots: {shots}")
    finally:
        browser.close()
    continued = og.upstream.chat_requests[-1].body
    assert any("deleted notes.txt" in str(m.get("content")) for m in continued["messages"])
    pending = httpx.get(base + "/ui/api/approvals").json()["data"]
    assert all(p["response_id"] != asking.id for p in pending)


def test_ui_api_query_numbers_out_of_range_are_400_not_500(og: Gateway) -> None:
    """Found by schemathesis: a 64-bit-overflowing `until` was a server error."""
    base = og.base_url.removesuffix("/v1")
    for query, param in (
        ("until=1723431652177815273472", "until"),
        ("since=-5", "since"),
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
    ):
        answer = httpx.get(f"{base}/ui/api/responses?{query}")
        assert answer.status_code == 400, (query, answer.text)
        assert answer.json()["error"]["param"] == param
    assert httpx.get(f"{base}/ui/api/responses?limit=500&since=0").status_code == 200
