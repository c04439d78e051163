"""Approving a `needs_approval` tool from the library: `Agent.approve` (issue 30)."""

from __future__ import annotations

from pydantic import BaseModel

from toolwire import Agent, Tool
from toolwire.errors import StopReason
from toolwire.testing import Reply, ScriptedUpstream


class Deploy(Tool):
    name = "deploy"
    description = "Deploy a service."
    needs_approval = True

    class Arguments(BaseModel):
        service: str

    def __init__(self) -> None:
        self.deployed: list[str] = []

    async def run(self, arguments: Deploy.Arguments) -> str:
        self.deployed.append(arguments.service)
        return f"{arguments.service} deployed"


async def test_an_approved_call_runs_once_and_the_run_goes_on() -> None:
    deploy = Deploy()
    upstream = ScriptedUpstream.in_process(
        [Reply(tool_calls=[("deploy", {"service": "api"})]), Reply(text="api is live.")]
    )
    async with Agent(upstream.adapter(), "m", [deploy]) as agent:
        waiting = await agent.run("Deploy api")
        assert waiting.reason == StopReason.AWAITING_APPROVAL
        assert [call.name for call in waiting.pending_approvals] == ["deploy"]
        assert deploy.deployed == []
        done = await agent.approve()
    assert done.reason == StopReason.ANSWERED and done.text == "api is live."
    assert deploy.deployed == ["api"]
    assert agent.pending_approvals == []
    # the model read the tool's result before answering
    assert "api deployed" in str(upstream.chat_requests[-1].body)


async def test_a_denied_call_does_not_run_and_the_model_is_told() -> None:
    deploy = Deploy()
    upstream = ScriptedUpstream.in_process(
        [Reply(tool_calls=[("deploy", {"service": "api"})]), Reply(text="Not deployed.")]
    )
    async with Agent(upstream.adapter(), "m", [deploy]) as agent:
        waiting = await agent.run("Deploy api")
        done = await agent.approve({waiting.pending_approvals[0].id: False})
    assert deploy.deployed == []
    assert done.text == "Not deployed."
    assert "denied" in str(upstream.chat_requests[-1].body).lower()
