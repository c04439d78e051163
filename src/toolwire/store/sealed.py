"""Sealed job requests: what a background job keeps of its request, encrypted at rest.

A queued job must keep its whole request so that any replica can run it, and that request may
carry secrets (an MCP server's `authorization` or headers). The row keeps it sealed with
Fernet (AES-CBC + HMAC, from `cryptography`, not hand-rolled) under a key every replica on the
database shares (`Store.secret`); the row is deleted when the job ends. A database dump, a log
of the row or a backup shows no credential in clear; someone who can read the secrets table
as well can still open it, so the database itself stays a secret store (docs/security.md).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from cryptography.fernet import Fernet, InvalidToken

SECRET_NAME = "job_requests"


class SealError(Exception):
    """The sealed value was not sealed with this database's key, or was altered."""


class Sealer:
    def __init__(self, secret: bytes) -> None:
        self._fernet = Fernet(base64.urlsafe_b64encode(secret[:32]))

    def seal(self, value: Any) -> str:
        return self._fernet.encrypt(orjson.dumps(value)).decode("ascii")

    def open(self, token: str) -> Any:
        try:
            return orjson.loads(self._fernet.decrypt(token.encode("ascii")))
        except (InvalidToken, ValueError) as exc:
            raise SealError("the job's sealed request cannot be opened") from exc
