"""HTTP plumbing every route shares: reading a JSON body, answering JSON, OpenAI list pages."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse

from toolwire.errors import InvalidRequestError


class ORJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def read_json(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        raise InvalidRequestError("the request body is empty; expected a JSON object")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"the request body is not valid JSON: {exc}") from None


def paginate(items: list[dict[str, Any]], request: Request) -> dict[str, Any]:
    """OpenAI list pagination: `order` (asc|desc), `after`, `limit` (1-100, default 20)."""
    order = request.query_params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order must be asc or desc", param="order")
    try:
        limit = int(request.query_params.get("limit", "20"))
    except ValueError:
        raise InvalidRequestError("limit must be an integer", param="limit") from None
    if not 1 <= limit <= 100:
        raise InvalidRequestError("limit must be between 1 and 100", param="limit")
    ordered = items if order == "asc" else list(reversed(items))
    after = request.query_params.get("after")
    if after:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise InvalidRequestError(f"after: no item with id '{after}'", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    page = ordered[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(ordered) > limit,
    }
