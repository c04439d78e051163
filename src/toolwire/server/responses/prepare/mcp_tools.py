"""`{"type": "mcp", ...}` tools in requests, and the MCP servers of toolwire's own config.

Credentials (`authorization`, header values, user info and token-ish query parameters of
`server_url`) open the connection and go nowhere else: the tool echoed in the response, and so
the stored response, shows them as `<redacted>`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from toolwire.config import McpServerConfig
from toolwire.errors import ConfigError, InvalidRequestError
from toolwire.tools.mcp.pool import McpServerSpec
from toolwire.tools.mcp.redact import REDACTED, redact_url
from toolwire.tools.mcp.toolset import ApprovalRule, approval_rule

_KNOWN = {
    "type",
    "server_label",
    "server_url",
    "headers",
    "authorization",
    "allowed_tools",
    "require_approval",
    "server_description",
    "connector_id",
}


@dataclass(slots=True)
class McpServerUse:
    """One MCP server as one request uses it."""

    spec: McpServerSpec
    allowed: frozenset[str] | None
    rule: ApprovalRule
    echo: dict[str, Any]


def configured_server(config: McpServerConfig) -> McpServerSpec:
    headers: dict[str, str] = {}
    for header, variable in config.headers_env.items():
        value = os.environ.get(variable)
        if value is None:
            raise ConfigError(
                f"MCP server {config.label!r}: environment variable {variable} is not set"
            )
        headers[header] = value
    if config.authorization_env:
        token = os.environ.get(config.authorization_env)
        if token is None:
            variable = config.authorization_env
            raise ConfigError(
                f"MCP server {config.label!r}: environment variable {variable} is not set"
            )
        headers["Authorization"] = f"Bearer {token}"
    return McpServerSpec(
        config.label,
        url=config.url,
        headers=headers,
        command=config.command,
        args=tuple(config.args),
        env=dict(config.env),
        trusted=True,
    )


def configured_use(config: McpServerConfig) -> McpServerUse:
    spec = configured_server(config)
    echo = {
        "type": "mcp",
        "server_label": config.label,
        "require_approval": config.require_approval,
    }
    if config.allowed_tools is not None:
        echo["allowed_tools"] = list(config.allowed_tools)
    return McpServerUse(
        spec,
        frozenset(config.allowed_tools) if config.allowed_tools is not None else None,
        approval_rule(config.require_approval, f"mcp_servers.{config.label}.require_approval"),
        echo,
    )


def request_use(
    entry: dict[str, Any], index: int, configured: dict[str, McpServerConfig]
) -> McpServerUse:
    where = f"tools[{index}]"
    unknown = set(entry) - _KNOWN
    if unknown:
        name = sorted(unknown)[0]
        raise InvalidRequestError(f"Unknown parameter: '{where}.{name}'.", param=f"{where}.{name}")
    label = entry.get("server_label")
    if not isinstance(label, str) or not label:
        raise InvalidRequestError(
            f"{where}.server_label must be a non-empty string", param=f"{where}.server_label"
        )
    url = entry.get("server_url")
    rule_value = entry.get("require_approval")
    rule = approval_rule(rule_value, f"{where}.require_approval")
    allowed = _allowed(entry.get("allowed_tools"), f"{where}.allowed_tools")
    echo = redacted(entry)
    if url is None:
        config = configured.get(label)
        if config is None:
            raise InvalidRequestError(
                f"{where}: no server_url, and toolwire has no MCP server labelled {label!r}",
                param=f"{where}.server_url",
            )
        use = configured_use(config)
        # The operator's policy wins: a request may narrow the tools and ask for approval
        # more often, never widen or skip what the config says.
        if rule_value is not None:
            operator_rule = use.rule
            use.rule = lambda name: operator_rule(name) or rule(name)
        if allowed is not None:
            use.allowed = allowed if use.allowed is None else use.allowed & allowed
        use.echo = echo
        return use
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidRequestError(
            f"{where}.server_url must be an http(s) URL", param=f"{where}.server_url"
        )
    headers = entry.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidRequestError(
            f"{where}.headers must map strings to strings", param=f"{where}.headers"
        )
    headers = dict(headers)
    authorization = entry.get("authorization")
    if authorization is not None:
        if not isinstance(authorization, str):
            raise InvalidRequestError(
                f"{where}.authorization must be a string", param=f"{where}.authorization"
            )
        headers["Authorization"] = (
            authorization
            if authorization.lower().startswith("bearer ")
            else f"Bearer {authorization}"
        )
    return McpServerUse(McpServerSpec(label, url=url, headers=headers), allowed, rule, echo)


def _allowed(value: Any, param: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get("tool_names")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise InvalidRequestError("allowed_tools must be a list of tool names", param=param)


def redacted(entry: dict[str, Any]) -> dict[str, Any]:
    """The tool as echoed and stored: secrets replaced."""
    echo = dict(entry)
    if "authorization" in echo:
        echo["authorization"] = REDACTED
    if isinstance(echo.get("headers"), dict):
        echo["headers"] = {k: REDACTED for k in echo["headers"]}
    if isinstance(echo.get("server_url"), str):
        echo["server_url"] = redact_url(echo["server_url"])
    return echo
