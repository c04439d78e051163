"""The OpenAI error shape, as the document describes it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ErrorObject(BaseModel):
    model_config = ConfigDict(extra="allow", title="ErrorObject")
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """Every error toolwire answers: `{"error": {message, type, param, code}}`."""

    model_config = ConfigDict(extra="allow", title="ErrorResponse")
    error: ErrorObject
