"""Sealing: JSON encrypted and authenticated with Fernet (AES-CBC + HMAC, from `cryptography`,
not hand-rolled) under a 32-byte secret. One mechanism for every use, each under its own key:

- Job requests (`server/responses/durable.py`, `BackgroundQueue`). A queued job must keep its whole
request so
  that any replica can run it, and that request may carry secrets (an MCP server's
  `authorization` or headers). The row keeps it sealed under a key every replica on the
  database shares (`Store.secret`) and is deleted when the job ends. A database dump, a log of
  the row or a backup shows no credential in clear; someone who can read the secrets table as
  well can still open it, so the database itself stays a secret store (docs/security.md).
- Compaction items (`loop/compaction.py`): the summary a client hands back, which it must
  neither read nor alter.
- MCP credentials of a response awaiting approval (`server/responses/prepare/approval_tools.py`), so
that an
  approval from `/ui`, which only holds the redacted echo, runs with the real ones.
- Reasoning handed to a client as a signature (`ReasoningSeal`: the Anthropic door's thinking
  signatures, the Gemini door's thought signatures), bound to the key that asked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

SECRET_NAME = "job_requests"


class SealError(Exception):
    """The sealed value was not sealed with this database's key, or was altered."""


class Sealer:
    def __init__(self, secret: bytes, label: bytes = b"") -> None:
        """`label` derives a key of its own from `secret` (HMAC), so that uses sharing one
        secret cannot open each other's tokens."""
        key = hmac.new(secret, label, hashlib.sha256).digest() if label else secret[:32]
        self._key = base64.urlsafe_b64encode(key)
        self._made: Fernet | None = None

    @property
    def _fernet(self) -> Fernet:
        """Made on first use: `cryptography` is ~9 MB a server that seals nothing need not
        hold."""
        if self._made is None:
            from cryptography.fernet import Fernet

            self._made = Fernet(self._key)
        return self._made

    def seal(self, value: Any) -> str:
        return self._fernet.encrypt(orjson.dumps(value)).decode("ascii")

    def open(self, token: str) -> Any:
        from cryptography.fernet import InvalidToken

        try:
            return orjson.loads(self._fernet.decrypt(token.encode("ascii")))
        except (InvalidToken, ValueError) as exc:
            raise SealError("the sealed value cannot be opened") from exc


class ReasoningSeal:
    """Signatures that carry a model's reasoning: the text sealed for the API key that asked,
    under a secret only the server holds, so that a door hands it to its client and replays it
    to the upstream when the client sends it back in history. A forged or altered signature,
    or one issued for another key or by someone else (the real Anthropic or Gemini API),
    opens to nothing: its reasoning is never replayed. `label`: each door's own key, so one
    door's signatures do not open on another."""

    def __init__(self, secret: bytes, label: bytes) -> None:
        self._sealer = Sealer(secret, label=label)

    @staticmethod
    def _owner(owner: str | None) -> str:
        return hashlib.sha256((owner or "").encode()).hexdigest()[:32]

    def sign(self, reasoning: str, owner: str | None, upstream: str | None = None) -> str:
        """`upstream`: the model server that wrote the reasoning (a fleet's), sealed with it:
        the signature coming back says where its session's prefix is."""
        payload = {"o": self._owner(owner), "r": reasoning}
        if upstream:
            payload["u"] = upstream
        return self._sealer.seal(payload)

    def open(self, signature: object, owner: str | None) -> str | None:
        opened = self.open_signed(signature, owner)
        return opened[0] if opened is not None else None

    def open_signed(self, signature: object, owner: str | None) -> tuple[str, str | None] | None:
        """(the reasoning, the model server that wrote it) of a signature this server issued
        for this key; None for any other."""
        if not isinstance(signature, str) or not signature:
            return None
        try:
            payload = self._sealer.open(signature)
        except (SealError, UnicodeEncodeError):
            return None
        if not isinstance(payload, dict) or payload.get("o") != self._owner(owner):
            return None
        reasoning = payload.get("r")
        if not isinstance(reasoning, str):
            return None
        upstream = payload.get("u")
        return reasoning, upstream if isinstance(upstream, str) else None
