"""Who sees what on `/ui` and `/metrics`.

A tenant key sees its own responses and conversations. An operator key (`toolwire keys create
NAME --operator`) sees every tenant's, may narrow the views to one key (or to `none`: history
from before the first key, which has no owner), sees the keys page, and reads `/metrics`
(which names every tenant's models and tools). A server without keys (loopback) treats
whoever reaches it as its operator.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from toolwire.server.gate.auth import is_operator, owner_of
from toolwire.store.ui_queries import Visible

OPERATOR_ONLY = (
    "This needs an operator key (`toolwire keys create NAME --operator`); a tenant's key sees "
    "only its own responses."
)


def operator_only() -> JSONResponse:
    """403 in the OpenAI error shape."""
    return JSONResponse(
        {
            "error": {
                "message": OPERATOR_ONLY,
                "type": "invalid_request_error",
                "param": None,
                "code": "operator_key_required",
            }
        },
        status_code=403,
    )


def visible(request: HTTPConnection) -> Visible:
    """The rows this request may see; an operator's `?key=` narrows them."""
    if is_operator(request):
        key = request.query_params.get("key") or None
        return Visible(owner=owner_of(request), everyone=True, key=key)
    return Visible(owner=owner_of(request), everyone=False)
