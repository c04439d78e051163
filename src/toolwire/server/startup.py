"""What `toolwire serve` checks and says before it serves: the port is free (before anything
slow starts), the upstream answers where it was told to (a warning, never a refusal: an
upstream that is merely down may come up later), and a short summary of what is being served.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

import httpx

from toolwire.errors import ConfigError
from toolwire.upstream.chat_completions import base_url_hint, shown_url
from toolwire.upstream.fleet.router import FleetRouter

PROBE_SECONDS = 3.0
"""How long start-up waits for the upstream's `/models`: long enough for a busy server, short
enough that a dead address costs a user seconds, not minutes."""


def check_port(host: str, port: int) -> None:
    """Refuse, at once, a port another process listens on: found only after the local model's
    start (seconds) it would waste the user's time. Bound the way uvicorn binds (SO_REUSEADDR),
    so a port left in TIME_WAIT by a previous run is not taken for a busy one."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot bind to host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {host} is already in use (another `toolwire serve`?): "
                    "stop that process or pick another port with --port N"
                ) from None
            raise ConfigError(f"cannot bind to {host}:{port}: {exc.strerror}") from None


@dataclass(slots=True)
class UpstreamCheck:
    """What the upstream's `/models` said: the models it lists, and warnings in words."""

    models: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


async def check_upstream(
    base_url: str,
    model: str | None,
    headers: dict[str, str] | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> UpstreamCheck:
    """GET `{base_url}/models` once: reachable, the key accepted, `/v1` where it belongs, the
    default model among those listed. Each problem becomes a warning that names the URL tried
    and the likely fix."""
    check = UpstreamCheck()
    base = base_url.rstrip("/")
    url = base + "/models"
    async with httpx.AsyncClient(
        timeout=PROBE_SECONDS, headers=headers or {}, transport=transport
    ) as client:
        try:
            answer = await client.get(url)
        except httpx.HTTPError as exc:
            check.warnings.append(
                f"the upstream at {shown_url(url)} does not answer now "
                f"({exc.__class__.__name__}: {exc or 'no answer'}); serving anyway: requests "
                "fail with 502 until it is up. Is the model server running, and the URL right?"
            )
            return check
        if answer.status_code in (401, 403):
            check.warnings.append(
                f"the upstream at {shown_url(url)} refused toolwire's credentials "
                f"(HTTP {answer.status_code}): pass --api-key-env VAR, VAR holding its API key"
            )
            return check
        if answer.status_code == 404:
            hint = base_url_hint(base)
            if not base.endswith("/v1"):
                try:
                    retried = await client.get(base + "/v1/models")
                    if retried.status_code == 200:
                        hint = f"did you mean --upstream {shown_url(base)}/v1 ? (it answers)"
                except httpx.HTTPError:
                    pass
            check.warnings.append(f"the upstream answered HTTP 404 for {shown_url(url)}: {hint}")
            return check
        if answer.status_code != 200:
            check.warnings.append(
                f"the upstream answered HTTP {answer.status_code} for {shown_url(url)}"
            )
            return check
    try:
        listed = answer.json().get("data", [])
        check.models = [str(m["id"]) for m in listed if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        check.warnings.append(f"{shown_url(url)} did not answer a model list (not JSON)")
        return check
    if model and check.models and model not in check.models:
        check.warnings.append(
            f"model {model!r} is not among those the upstream lists ({_listing(check.models)}): "
            "requests that name no model will likely fail; pick one with --model"
        )
    return check


def _listing(models: list[str]) -> str:
    shown = ", ".join(models[:5])
    return shown + (f" and {len(models) - 5} more" if len(models) > 5 else "")


def fleet_lines(router: FleetRouter) -> list[str]:
    """One line per model server of a fleet: where it is, what it serves, whether it
    answered."""
    lines = []
    for row in router.status():
        if row.models is None:
            serves = "models unknown until it answers"
        else:
            serves = _listing(row.models) if row.models else "no models"
        state = "up" if row.last_error is None else f"not answering: {row.last_error}"
        weight = f", weight {row.weight:g}" if row.weight != 1 else ""
        lines.append(f"{row.name} at {row.url}: {serves} ({state}{weight})")
    return lines


def summary_lines(
    *,
    upstream: str,
    model: str | None,
    listed: list[str],
    database: str,
    host: str,
    port: int,
    keys: int,
    fleet: list[str] | None = None,
) -> list[str]:
    """The few lines `serve` prints once it is ready: what a user wants to know first.
    `fleet`: one line per model server, when there are several (`fleet_lines`)."""
    shown_host = f"[{host}]" if ":" in host else host
    base = f"http://{shown_host}:{port}"
    if model:
        model_line = model
    elif listed:
        model_line = f"none by default (requests name one; the upstream lists {_listing(listed)})"
    else:
        model_line = "none by default: requests must name one (or pass --model)"
    key_line = (
        f"on ({keys} active; clients send one as a Bearer token)"
        if keys
        else "off (no keys: anyone who can reach the port may use it; "
        "`toolwire keys create NAME` turns them on)"
    )
    if fleet is not None:
        upstream_lines = [f"  upstreams: {len(fleet)}, routed by model"]
        upstream_lines += [f"    - {line}" for line in fleet]
    else:
        upstream_lines = [f"  upstream: {upstream}"]
    return [
        f"toolwire serving on {base}/v1",
        *upstream_lines,
        f"  model:    {model_line}",
        f"  database: {database}",
        f"  keys:     {key_line}",
        f"  runs:     {base}/ui",
    ]
