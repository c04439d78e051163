"""`/ui`: a static page (plain HTML, JS and CSS from `static/`, no build step; charts drawn by
the vendored uPlot in `static/vendor/`, MIT) and the JSON it reads under `/ui/api/`. The page
sends `Authorization: Bearer <key>` with every call, from a key the user pastes (kept in
sessionStorage); what a key sees is `access.visible` (a tenant: its own rows; an operator:
everyone's). Approvals are answered through `POST /v1/responses`, as any client would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from os import PathLike
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from toolwire.errors import InvalidRequestError, NotFoundError
from toolwire.server.gate.auth import is_operator, owner_of
from toolwire.server.http.helpers import ORJSONResponse
from toolwire.server.operator.ui.access import operator_only, visible
from toolwire.server.operator.ui.overview import overview
from toolwire.store.database import Store
from toolwire.store.ui_queries import ResponseFilter
from toolwire.upstream.fleet.router import ReplicaStatus
from toolwire.wire.timeline import PendingApproval

STATIC = Path(__file__).parent / "static"
#: The page may not be framed by any other page (clickjacking of Approve: a hostile page
#: overlaying the button with its own), in the two spellings browsers read (CSP's
#: `frame-ancestors`, and `X-Frame-Options` for older ones); and it loads nothing but its own
#: files. Sent with the page and with every static file (`/ui/static/index.html` is the page).
PAGE_HEADERS = {
    "x-frame-options": "DENY",
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
_NO_CACHE = {"cache-control": "no-cache", **PAGE_HEADERS}


class _StaticFiles(StaticFiles):
    """The page's files, with `PAGE_HEADERS`."""

    def file_response(
        self,
        full_path: PathLike[str] | str,
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(PAGE_HEADERS)
        return response


def _owner(request: Request) -> str | None:
    """The owner `UiQueries.recent_responses` keeps to (None: every row, for an operator)."""
    return None if is_operator(request) else owner_of(request)


#: Query integers are checked against these bounds (a database integer is 64-bit: a larger
#: one would be a server error, not the client's 400).
LIMIT_RANGE = (1, 500)
TIME_RANGE = (0, 2**62)
OFFSET_RANGE = (0, 2**31)
#: The overview's default range: the last day.
DAY = 86400


def without_server(entry: Any) -> Any:
    """A timeline entry as a tenant sees it: without the fleet's model server it names."""
    if isinstance(entry, dict) and "upstream" in entry:
        return {key: value for key, value in entry.items() if key != "upstream"}
    return entry


def _int(
    request: Request, name: str, default: int | None = None, bounds: tuple[int, int] = TIME_RANGE
) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequestError(f"{name} must be an integer", param=name) from None
    low, high = bounds
    if not low <= number <= high:
        raise InvalidRequestError(f"{name} must be between {low} and {high}", param=name)
    return number


def ui_routes(
    store: Store,
    upstream_name: str,
    fleet: Callable[[], Sequence[ReplicaStatus]] | None = None,
) -> list[BaseRoute]:
    """`fleet`: the state of each model server, when the gateway routes among several."""
    queries = store.ui

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=_NO_CACHE)

    async def me(request: Request) -> Response:
        owner = owner_of(request)
        names = await queries.key_names() if owner is not None else {}
        return ORJSONResponse(
            {
                "operator": is_operator(request),
                "key_id": owner,
                "key_name": names.get(owner) if owner else None,
                "keys_in_use": owner is not None,
                "upstream": upstream_name,
            }
        )

    async def list_responses(request: Request) -> Response:
        limit = _int(request, "limit", 50, LIMIT_RANGE) or 50
        offset = _int(request, "offset", 0, OFFSET_RANGE) or 0
        where = ResponseFilter(
            status=request.query_params.get("status") or None,
            model=request.query_params.get("model") or None,
            since=_int(request, "since"),
            until=_int(request, "until"),
            text=(request.query_params.get("q") or "").strip()[:200] or None,
        )
        rows, total = await queries.responses(visible(request), where, offset=offset, limit=limit)
        asked = [rid for row in rows for rid in row["approval_requests"]]
        decided = await queries.decided(asked)
        names = await queries.key_names()
        for row in rows:
            row["pending_approvals"] = [r for r in row["approval_requests"] if r not in decided]
            row["key_name"] = names.get(row["owner"]) if row["owner"] else None
        return ORJSONResponse(
            {
                "object": "list",
                "data": rows,
                "total": total,
                "offset": offset,
                "limit": limit,
                "has_more": offset + len(rows) < total,
            }
        )

    async def models(request: Request) -> Response:
        return ORJSONResponse({"object": "list", "data": await queries.models(visible(request))})

    async def one(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        found = await queries.response(visible(request), response_id)
        if found is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
        body = found["body"]
        entries = await queries.timeline(response_id) or []
        if not is_operator(request):  # which model server served each call: operators only
            entries = [without_server(entry) for entry in entries]
        asked = [
            item["id"]
            for item in body.get("output") or []
            if item.get("type") == "mcp_approval_request"
        ]
        decided = await queries.decided(asked)
        names = await queries.key_names()
        return ORJSONResponse(
            {
                "response": body,
                "input_items": found["input_items"],
                "owner": found["owner"],
                "key_name": names.get(found["owner"]) if found["owner"] else None,
                "timeline": entries,
                "pending_approvals": [a for a in asked if a not in decided],
            }
        )

    async def pending_approvals(request: Request) -> Response:
        since = _int(request, "since", int(time.time()) - 7 * 86400)
        rows = await queries.recent_responses(owner=_owner(request), since=since, limit=200)
        asked = [rid for row in rows for rid in row["approval_requests"]]
        decided = await queries.decided(asked)
        waiting: list[PendingApproval] = []
        for row in rows:
            open_ids = [a for a in row["approval_requests"] if a not in decided]
            if not open_ids:
                continue
            body = await queries.response_body(row["id"], _owner(request))
            if body is None:
                continue
            for item in body.get("output") or []:
                if item.get("type") == "mcp_approval_request" and item.get("id") in open_ids:
                    waiting.append(
                        {
                            "response_id": row["id"],
                            "created_at": row["created_at"],
                            "model": body.get("model"),
                            "approval_request_id": item["id"],
                            "name": item.get("name"),
                            "server_label": item.get("server_label"),
                            "arguments": item.get("arguments"),
                            "tools": body.get("tools") or [],
                        }
                    )
        return ORJSONResponse({"object": "list", "data": waiting})

    async def list_conversations(request: Request) -> Response:
        limit = _int(request, "limit", 50, LIMIT_RANGE) or 50
        offset = _int(request, "offset", 0, OFFSET_RANGE) or 0
        rows, total = await queries.conversations(visible(request), offset=offset, limit=limit)
        return ORJSONResponse(
            {"object": "list", "data": rows, "total": total, "offset": offset, "limit": limit}
        )

    async def conversation(request: Request) -> Response:
        conversation_id = request.path_params["conversation_id"]
        found = await queries.conversation(visible(request), conversation_id)
        if found is None:
            raise NotFoundError(
                f"Conversation with id '{conversation_id}' not found.", param="conversation_id"
            )
        return ORJSONResponse(found)

    async def summary(request: Request) -> Response:
        now = int(time.time())
        until = _int(request, "until", now) or now
        since = _int(request, "since", until - DAY)
        since = until - DAY if since is None else since
        if since >= until:
            raise InvalidRequestError("since must be before until", param="since")
        runs = await queries.runs(visible(request), since, until)
        servers = is_operator(request)
        return ORJSONResponse(overview(runs, since, until, upstream_name, servers=servers))

    async def upstreams(request: Request) -> Response:
        """Each model server's circuit, load, error rate and latency (operators: it names
        the infrastructure); an empty list for a gateway with one upstream."""
        if not is_operator(request):
            return operator_only()
        rows = [asdict(row) for row in fleet()] if fleet is not None else []
        return ORJSONResponse({"upstreams": rows})

    async def keys(request: Request) -> Response:
        if not is_operator(request):
            return operator_only()
        listing = await store.keys.listing(include_revoked=True)
        usage = await store.quotas.usage()
        data = []
        for key in listing:
            used = usage.get(key.id)
            data.append(
                {
                    "id": key.id,
                    "name": key.name,
                    "prefix": key.prefix,
                    "operator": key.operator,
                    "created_at": key.created_at,
                    "revoked_at": key.revoked_at,
                    "limits": {
                        "rpm": key.limits.rpm,
                        "tpm": key.limits.tpm,
                        "budget": key.limits.budget,
                        "budget_period": key.limits.budget_period or "month",
                    },
                    "usage": None
                    if used is None
                    else {
                        "requests_this_minute": used.requests_this_minute,
                        "tokens_this_minute": used.tokens_this_minute,
                        "budget_used": used.budget_used,
                        "budget_resets_at": used.budget_resets_at,
                    },
                }
            )
        return ORJSONResponse({"object": "list", "data": data})

    return [
        Route("/ui", page, methods=["GET"]),
        Route("/ui/", page, methods=["GET"]),
        Route("/ui/api/me", me, methods=["GET"]),
        Route("/ui/api/overview", summary, methods=["GET"]),
        Route("/ui/api/models", models, methods=["GET"]),
        Route("/ui/api/keys", keys, methods=["GET"]),
        Route("/ui/api/upstreams", upstreams, methods=["GET"]),
        Route("/ui/api/responses", list_responses, methods=["GET"]),
        Route("/ui/api/responses/{response_id}", one, methods=["GET"]),
        Route("/ui/api/approvals", pending_approvals, methods=["GET"]),
        Route("/ui/api/conversations", list_conversations, methods=["GET"]),
        Route("/ui/api/conversations/{conversation_id}", conversation, methods=["GET"]),
        Mount("/ui/static", _StaticFiles(directory=STATIC), name="ui-static"),
    ]
