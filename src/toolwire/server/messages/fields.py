"""Reading a Messages request's JSON by hand: each helper refuses a wrong type with a 400 that
names where it was."""

from __future__ import annotations

from typing import Any

from toolwire.errors import InvalidRequestError


def invalid(message: str, param: str | None = None) -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def expect_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{where}: expected an object", where)
    return value


def expect_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise invalid(f"{where}: expected a string", where)
    return value
