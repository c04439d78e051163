"""Approvals: which calls waited for a human, which decisions the caller sent, and which of those
may still run.

Only requests this gateway issued are honoured. Each `mcp_approval_request` id carries an HMAC
over the key that owns the run, the server label, the tool name and the exact arguments, made
with a secret the clients never see: a request the client wrote itself (into a conversation, or
inline in its input), or one whose arguments it altered, or one issued to another key, fails the
check and runs nothing (a 400, raised by `server/responses/prepare/validation/approvals.py`). The
same check makes inline history work (`store: false`, no `previous_response_id`: the request travels
in the input). Replays are stopped by the driver, which claims each decision once (through an
`ApprovalLedger`) before it runs or denies anything.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from toolwire.transcript import ToolCall
from toolwire.wire.items import Item

ALREADY_USED = "this approval was already used; the call did not run again"
DENIED = "the user denied approval for this call; it did not run"


_PREFIX = "mcpr_"
_NONCE = 24  # hex characters
_MAC = 32  # hex characters: 128 bits of HMAC-SHA256


class ApprovalSigner:
    """Issues approval request ids bound to what they ask about, and checks them."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, nonce: str, owner: str | None, label: str, name: str, arguments: str) -> str:
        message = "\0".join((nonce, owner or "", label, name, arguments)).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:_MAC]

    def issue(self, owner: str | None, label: str, name: str, arguments: str) -> str:
        nonce = secrets.token_hex(_NONCE // 2)
        return _PREFIX + nonce + self._mac(nonce, owner, label, name, arguments)

    def verify(self, request: Item, owner: str | None) -> bool:
        request_id = request.get("id")
        if not isinstance(request_id, str) or len(request_id) != len(_PREFIX) + _NONCE + _MAC:
            return False
        nonce, mac = request_id[len(_PREFIX) : -_MAC], request_id[-_MAC:]
        fields = (request.get("server_label"), request.get("name"), request.get("arguments"))
        if not all(isinstance(f, str) for f in fields):
            return False
        label, name, arguments = fields
        expected = self._mac(nonce, owner, str(label), str(name), str(arguments))
        return hmac.compare_digest(mac, expected)


@dataclass(slots=True)
class ApprovalDecisions:
    """Decisions in a request's input on requests pending in its history."""

    decisions: dict[str, bool] = field(default_factory=dict)
    """approval_request_id -> approve."""
    calls: list[ToolCall] = field(default_factory=list)
    """The calls those requests asked about, in input order: run (or denied) first."""
