"""Does a call fit its tool? The arguments judged against the declared schema, and repaired
where the repair has one meaning only.

The repairs (each made only where the schema says what it wants, and kept only if the result
then fits as a whole):

- `numeric_string`: `"5"` where the schema wants an integer or a number, when the string is
  exactly one JSON number (no spaces, no sign but `-`, nothing else);
- `boolean_string`: `"true"` / `"false"` where it wants a boolean;
- `json_string`: a string holding a JSON object (or array) where it wants an object (array);
- `wrapper`: the arguments wrapped once in a lone `arguments` / `input` / `parameters` / `args`
  key that the schema does not declare, when the inner object fits (DeepSeek V3.2/V4 on vLLM
  and SGLang);
- `empty_arguments`: `null` or `""` for a tool that `{}` fits (no required property).

Anything else that does not fit (a missing required property, an enum or `const` miss, a type
no repair gives, an extra key in a closed object) is a misfit: the loop re-asks the model
(`loop/fitting.py`). Arguments that fit are never touched. Pure: no I/O, no loop state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import orjson

from toolwire.tools.schema_check import CheckedSchema, PathPart, Violation, json_path

RepairKind = Literal[
    "numeric_string", "boolean_string", "json_string", "wrapper", "empty_arguments"
]

WRAPPERS = ("arguments", "input", "parameters", "args")
#: Rounds of repair: a JSON string decoded may reveal a `"5"` inside it, no more.
_ROUNDS = 4
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


class Verdict(StrEnum):
    FITS = "fits"
    """As the model wrote it: untouched."""
    REPAIRED = "repaired"
    """Fits after one-meaning repairs (`Fit.arguments`, `Fit.repairs`)."""
    MISFIT = "misfit"
    """Does not fit, and no one-meaning repair makes it (`Fit.problems`)."""
    NOT_AN_OBJECT = "not_an_object"
    """Arguments that are no JSON object at all (unparsable, cut off): the assembler's
    `parse_error` already says why; not judged here."""


@dataclass(slots=True, frozen=True)
class ArgumentRepair:
    kind: RepairKind
    path: str
    """Where (`$.limit`; `$` for the whole arguments)."""


@dataclass(slots=True, frozen=True)
class Fit:
    verdict: Verdict
    arguments: dict[str, object] | None = None
    """REPAIRED: the arguments that fit."""
    repairs: tuple[ArgumentRepair, ...] = ()
    problems: tuple[Violation, ...] = ()
    """MISFIT: what does not fit, in the arguments as the model wrote them."""

    def explain(self) -> str:
        """The problems as one line the model (and an operator) can act on."""
        return describe(self.problems)


FITS = Fit(Verdict.FITS)
NOT_AN_OBJECT = Fit(Verdict.NOT_AN_OBJECT)


def describe(problems: Iterable[Violation]) -> str:
    return "; ".join(f"at {p.where}: {p.message}" for p in problems)


def fit_arguments(schema: CheckedSchema, arguments: dict[str, object] | None, raw: str) -> Fit:
    """Judge one call's arguments (`arguments`: parsed, None when they did not parse; `raw`:
    the model's text)."""
    if arguments is None:
        return _not_an_object(schema, raw)
    if schema.fits(arguments):
        return FITS
    unwrapped = _unwrapped(schema, arguments)  # before the violations: they cost µs each
    if unwrapped is not None:
        return unwrapped
    quick = _top_level_coerced(schema, arguments)
    if quick is not None:
        return quick
    problems = tuple(schema.violations(arguments))
    if not problems:  # `is_valid` and `iter_errors` disagree: never act on a doubt
        return FITS
    repaired, repairs = _coerced(schema, arguments, problems)
    if repaired is not None:
        return Fit(Verdict.REPAIRED, repaired, repairs)
    return Fit(Verdict.MISFIT, problems=problems)


def _not_an_object(schema: CheckedSchema, raw: str) -> Fit:
    text = raw.strip()
    if text not in ("null", '""'):
        return NOT_AN_OBJECT
    if schema.fits({}):
        return Fit(Verdict.REPAIRED, {}, (ArgumentRepair("empty_arguments", "$"),))
    problems = tuple(schema.violations({}))
    said = Violation((), f"the arguments are {text}, not an object", "type", ("object",))
    return Fit(Verdict.MISFIT, problems=(said, *problems))


def _unwrapped(schema: CheckedSchema, arguments: dict[str, object]) -> Fit | None:
    """`{"arguments": {...}}` with the inner object fitting (itself repaired, if need be)."""
    if len(arguments) != 1:
        return None
    ((key, inner),) = arguments.items()
    if key not in WRAPPERS or key in schema.properties:
        return None
    if isinstance(inner, str):
        inner = _decoded(inner, dict)
    if not isinstance(inner, dict):
        return None
    wrapper = ArgumentRepair("wrapper", json_path((key,)))
    if schema.fits(inner):
        return Fit(Verdict.REPAIRED, inner, (wrapper,))
    repaired, repairs = _coerced(schema, inner, tuple(schema.violations(inner)))
    if repaired is None:
        return None
    return Fit(Verdict.REPAIRED, repaired, (wrapper, *repairs))


def _top_level_coerced(schema: CheckedSchema, arguments: dict[str, object]) -> Fit | None:
    """The common case without asking the validator why (each violation it explains costs
    µs): string values of top-level properties whose `type` admits no string, given the
    one meaning they have; kept only if the whole call then fits."""
    typed = schema.typed
    repairs: list[ArgumentRepair] = []
    fixed: dict[str, object] | None = None
    for name, value in arguments.items():
        kinds = typed.get(name)
        if kinds is None or not isinstance(value, str):
            continue
        meaning = _one_meaning(value, kinds)
        if meaning is None:
            return None  # a string no repair gives: the validator explains it
        if fixed is None:
            fixed = dict(arguments)
        fixed[name] = meaning[1]
        repairs.append(ArgumentRepair(meaning[0], json_path((name,))))
    if fixed is None or not schema.fits(fixed):
        return None
    return Fit(Verdict.REPAIRED, fixed, tuple(repairs))


def _coerced(
    schema: CheckedSchema, arguments: dict[str, object], problems: tuple[Violation, ...]
) -> tuple[dict[str, object] | None, tuple[ArgumentRepair, ...]]:
    """The arguments with every one-meaning string repair the violations call for, if they
    then fit (None, otherwise)."""
    work: object = None
    repairs: list[ArgumentRepair] = []
    for _ in range(_ROUNDS):
        changed = False
        for problem in problems:
            if not problem.types:
                continue
            if work is None:
                work = orjson.loads(orjson.dumps(arguments))  # a copy: the call keeps its own
            value = _at(work, problem.path)
            if not isinstance(value, str):
                continue
            meaning = _one_meaning(value, problem.types)
            if meaning is None:
                continue
            kind, replacement = meaning
            work = _replaced(work, problem.path, replacement)
            repairs.append(ArgumentRepair(kind, problem.where))
            changed = True
        if not changed or not isinstance(work, dict):
            return None, ()
        if schema.fits(work):
            return work, tuple(repairs)
        problems = tuple(schema.violations(work))
    return None, ()


def _one_meaning(value: str, types: tuple[str, ...]) -> tuple[RepairKind, object] | None:
    """The one value `value` can mean as one of `types` (and the repair's kind), or None.
    Never None itself: a JSON `null` is no repair's result."""
    if "integer" in types and _INTEGER.fullmatch(value):
        return "numeric_string", int(value)
    if "number" in types and _NUMBER.fullmatch(value):
        try:
            return "numeric_string", orjson.loads(value)
        except orjson.JSONDecodeError:  # out of range (1e400)
            return None
    if "boolean" in types and value in ("true", "false"):
        return "boolean_string", value == "true"
    if "object" in types:
        decoded = _decoded(value, dict)
        if decoded is not None:
            return "json_string", decoded
    if "array" in types:
        decoded = _decoded(value, list)
        if decoded is not None:
            return "json_string", decoded
    return None


def _decoded(text: str, kind: type) -> object:
    stripped = text.strip()
    if not stripped or stripped[0] != ("{" if kind is dict else "["):
        return None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, kind) else None


def _at(document: object, path: tuple[PathPart, ...]) -> object:
    node = document
    for part in path:
        if isinstance(node, dict) and isinstance(part, str):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def _replaced(document: object, path: tuple[PathPart, ...], value: object) -> object:
    if not path:
        return value
    parent = _at(document, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        parent[last] = value
    if isinstance(parent, list) and isinstance(last, int):  # `_at` found it: in range
        parent[last] = value
    return document
