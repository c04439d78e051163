"""A tool's declared JSON Schema, compiled once, checking a call's arguments.

Clients write tool schemas as JSON Schema draft 2020-12 (or the draft their `$schema` names) and
the OpenAPI subset OpenAI and Anthropic accept (`type` lists, `anyOf`/`oneOf`/`allOf`, `enum`,
`const`, `$ref`/`$defs`, `additionalProperties`, `nullable`). They are checked with
jsonschema-rs, a compiled validator: the pure-Python `jsonschema` takes 20 to 40 µs a call on
Claude Code's `Read`/`Edit`/`Bash` schemas, jsonschema-rs under one
(`benchmarks/argument_check.py`). A compiled schema is kept by its canonical hash (its JSON
with sorted keys, hashed with BLAKE2b), so the tool list an agent sends with every request is
compiled once per process, and the cache is bounded.

Never a false alarm: `format` is not asserted (an annotation in 2020-12); OpenAPI's
`nullable: true` admits `null`; a schema the validator cannot use (not valid JSON Schema, a
`$ref` to another document, which is never fetched, a pattern its regex engine refuses)
compiles to None, and its calls are not checked at all.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
import orjson

#: Compiled schemas kept (a busy gateway sees a few agents' tool lists, a few dozen tools each).
CACHE_SIZE = 1024
#: Violations read from one call's arguments: enough to tell the model everything it must fix.
MAX_VIOLATIONS = 8

PathPart = str | int


@dataclass(slots=True, frozen=True)
class Violation:
    """One way a call's arguments miss the schema, as the validator says it."""

    path: tuple[PathPart, ...]
    """Where, in the arguments (keys and indexes); empty for the arguments object itself."""
    message: str
    keyword: str
    """The schema keyword that failed: `type`, `required`, `enum`, `anyOf`, ..."""
    types: tuple[str, ...] = ()
    """The JSON types the schema accepts at `path`, where the keyword says (`type`, or the
    `type` of each branch of an `anyOf` / `oneOf`)."""

    @property
    def where(self) -> str:
        return json_path(self.path)


def json_path(path: tuple[PathPart, ...]) -> str:
    """`$.edits[0].old_string`: a place in the arguments as people write it."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isidentifier():
            out.append(f".{part}")
        else:
            out.append(f"[{orjson.dumps(part).decode()}]")
    return "".join(out)


class CheckedSchema:
    """A tool's parameters, compiled: `fits` for the common case, `violations` to explain."""

    __slots__ = ("_validator", "properties", "typed")

    def __init__(
        self, validator: Any, properties: frozenset[str], typed: dict[str, tuple[str, ...]]
    ) -> None:
        self._validator = validator
        self.properties = properties
        """The top-level property names the schema declares."""
        self.typed = typed
        """Top-level properties whose `type` admits no string, with those types: where a
        string value is wrong whatever else the schema says (the repairs' fast path)."""

    def fits(self, arguments: object) -> bool:
        """True also for a value the validator cannot read (no JSON: a library tool's call
        built by hand), which is then not checked: never a false alarm."""
        try:
            return bool(self._validator.is_valid(arguments))
        except ValueError:
            return True

    def violations(self, arguments: object) -> list[Violation]:
        found: list[Violation] = []
        try:
            for error in self._validator.iter_errors(arguments):
                found.append(_violation(error))
                if len(found) >= MAX_VIOLATIONS:
                    break
        except ValueError:
            return []
        return found


def _violation(error: Any) -> Violation:
    kind = error.kind
    keyword = str(kind.name)
    path = tuple(error.instance_path)
    types: tuple[str, ...] = ()
    if keyword == "type":
        types = tuple(kind.types)
    elif keyword in ("anyOf", "oneOf"):
        wanted: list[str] = []
        for branch in kind.context or ():
            for sub in branch:
                if sub.kind.name == "type" and tuple(sub.instance_path) == path:
                    wanted.extend(t for t in sub.kind.types if t not in wanted)
        types = tuple(wanted)
    return Violation(path, str(error.message), keyword, types)


_cache: OrderedDict[bytes, CheckedSchema | None] = OrderedDict()
_lock = threading.Lock()


#: The same schema object seen again (the chat door shares the specs of a tool list it read
#: before, a library tool keeps its own): its compiled form without hashing it again. Holds
#: each schema it names, so an id is never reused while listed; cleared when full.
_by_identity: dict[int, tuple[Mapping[str, object], CheckedSchema | None]] = {}
IDENTITY_SIZE = 64


def checked_schema(schema: Mapping[str, object]) -> CheckedSchema | None:
    """`schema` compiled (from the cache when it was seen before); None when it cannot be
    used (module docstring). A schema is declared once and never changed in place."""
    known = _by_identity.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    compiled = _checked(schema)
    if len(_by_identity) >= IDENTITY_SIZE:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, compiled)
    return compiled


def _checked(schema: Mapping[str, object]) -> CheckedSchema | None:
    try:
        canonical = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (a library tool's schema built by hand)
        return None
    key = hashlib.blake2b(canonical, digest_size=16).digest()
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    compiled = _compile(schema, b'"nullable"' in canonical)
    with _lock:
        _cache[key] = compiled
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled


def _compile(schema: Mapping[str, object], nullable: bool) -> CheckedSchema | None:
    document = _admit_nullable(schema) if nullable else dict(schema)
    try:
        validator = jsonschema_rs.validator_for(
            document, validate_formats=False, offline=True, ignore_unknown_formats=True
        )
    except Exception:  # any refusal (invalid schema, unreachable $ref, bad regex): unchecked
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return CheckedSchema(validator, frozenset(), {})
    typed: dict[str, tuple[str, ...]] = {}
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        kinds = (kind,) if isinstance(kind, str) else tuple(kind) if isinstance(kind, list) else ()
        if kinds and "string" not in kinds and all(isinstance(k, str) for k in kinds):
            typed[name] = kinds
    return CheckedSchema(validator, frozenset(properties), typed)


def _admit_nullable(schema: Mapping[str, object]) -> dict[str, Any]:
    admitted = _nullable(schema)
    return admitted if isinstance(admitted, dict) else {"anyOf": [admitted]}


def _nullable(node: object) -> object:
    """OpenAPI's `nullable: true` as JSON Schema says it: `null` among the types (and the
    enum), or one more `anyOf` branch where the node names no type."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {key: _nullable(value) for key, value in node.items()}
    if out.get("nullable") is not True:
        return out
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list):
        out["type"] = [*kind, "null"] if "null" not in kind else kind
    else:
        return {"anyOf": [out, {"type": "null"}]}
    enum = out.get("enum")
    if isinstance(enum, list) and None not in enum:
        out["enum"] = [*enum, None]
    return out


def cache_clear() -> None:
    """Forget every compiled schema (tests, benchmarks measuring a cold compile)."""
    with _lock:
        _cache.clear()
        _by_identity.clear()
