"""Reading a Gemini request's JSON by hand: fields by their camelCase or snake_case name, each of
the wrong type refused with a 400 that names where it was."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.errors import InvalidRequestError


def invalid(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(f"{param}: {message}" if param else message, param=param or None)


def snake_case(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


def read_field(obj: Mapping[str, Any], name: str) -> Any:
    """A field by its lowerCamelCase name, or by its snake_case one."""
    value = obj.get(name)
    return obj.get(snake_case(name)) if value is None else value


def expect_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid("expected an object", where)
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid("expected a list", where)
    return value


def expect_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise invalid("expected a string", where)
    return value


def number_field(
    config: Mapping[str, Any], name: str, low: float, high: float | None
) -> float | None:
    value = read_field(config, name)
    if value is None:
        return None
    where = f"generationConfig.{name}"
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or value < low or (high is not None and value > high):
        limit = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise invalid(f"must be a number {limit}", where)
    return float(value)


def integer_field(
    config: Mapping[str, Any], name: str, low: int, high: int | None = None
) -> int | None:
    value = read_field(config, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise invalid(f"must be an integer of at least {low}", f"generationConfig.{name}")
    if high is not None and value > high:
        raise invalid(f"must be an integer of at most {high}", f"generationConfig.{name}")
    return value


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)
