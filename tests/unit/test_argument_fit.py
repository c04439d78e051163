"""A call's arguments judged against its tool's schema (`tools/schema_check.py`,
`tools/argument_fit.py`): JSON Schema as clients write it, repairs with one meaning only, and
never a false alarm; which upstreams are asked to enforce `strict` (`upstream/strict.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from toolwire.tools import schema_check
from toolwire.tools.argument_fit import Verdict, fit_arguments
from toolwire.tools.schema_check import CheckedSchema, checked_schema
from toolwire.upstream.strict import StrictSupport, vllm_enforces


def compiled(schema: dict[str, Any]) -> CheckedSchema:
    found = checked_schema(schema)
    assert found is not None
    return found


def obj(properties: dict[str, Any], required: list[str] | None = None, **more: Any) -> Any:
    return {"type": "object", "properties": properties, "required": required or [], **more}


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        # type lists, anyOf / oneOf / allOf, enum / const, $ref / $defs, nested
        (obj({"n": {"type": ["integer", "null"]}}), {"n": None}),
        (obj({"v": {"anyOf": [{"type": "string"}, {"type": "array"}]}}), {"v": ["a"]}),
        (obj({"v": {"oneOf": [{"const": "a"}, {"const": "b"}]}}), {"v": "b"}),
        (
            {"allOf": [obj({"a": {"type": "string"}}, ["a"]), obj({"b": {"type": "integer"}})]},
            {"a": "x", "b": 2},
        ),
        (
            {**obj({"p": {"$ref": "#/$defs/point"}}, ["p"]), "$defs": {"point": obj({"x": {}})}},
            {"p": {"x": 1}},
        ),
        (obj({"e": {"type": "array", "items": obj({"k": {"enum": [1, 2]}}, ["k"])}}), {"e": []}),
        # what would be a false alarm: `format` is an annotation; OpenAPI's `nullable`
        (obj({"when": {"type": "string", "format": "date-time"}}), {"when": "tomorrow"}),
        (obj({"note": {"type": "string", "nullable": True}}), {"note": None}),
        (obj({"mode": {"type": "string", "enum": ["a"], "nullable": True}}), {"mode": None}),
        # a draft-07 schema (its formats are not asserted either)
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **obj({"m": {"format": "email"}}),
            },
            {"m": "not an address"},
        ),
    ],
)
def test_valid_calls_fit_untouched(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    assert fit_arguments(compiled(schema), arguments, "").verdict is Verdict.FITS


@pytest.mark.parametrize(
    ("schema", "written", "meant", "kinds"),
    [
        (obj({"n": {"type": "integer"}}), {"n": "-12"}, {"n": -12}, ["numeric_string"]),
        (obj({"x": {"type": "number"}}), {"x": "2.5e3"}, {"x": 2500.0}, ["numeric_string"]),
        (obj({"b": {"type": "boolean"}}), {"b": "false"}, {"b": False}, ["boolean_string"]),
        (
            obj({"o": obj({"k": {"type": "integer"}}, ["k"])}),
            {"o": '{"k": "3"}'},
            {"o": {"k": 3}},
            ["json_string", "numeric_string"],
        ),
        (obj({"l": {"type": "array"}}), {"l": "[1, 2]"}, {"l": [1, 2]}, ["json_string"]),
        (
            obj({"v": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}}),
            {"v": "true"},
            {"v": True},
            ["boolean_string"],
        ),
        (
            obj({"c": {"type": "string"}}, ["c"], additionalProperties=False),
            {"args": {"c": "ls"}},
            {"c": "ls"},
            ["wrapper"],
        ),
        (
            obj({"c": {"type": "string"}, "t": {"type": "integer"}}, ["c"]),
            {"parameters": '{"c": "ls", "t": "9"}'},
            {"c": "ls", "t": 9},
            ["wrapper", "numeric_string"],
        ),
    ],
)
def test_one_meaning_repairs(
    schema: dict[str, Any], written: dict[str, Any], meant: dict[str, Any], kinds: list[str]
) -> None:
    fit = fit_arguments(compiled(schema), written, "")
    assert fit.verdict is Verdict.REPAIRED and fit.arguments == meant
    assert [repair.kind for repair in fit.repairs] == kinds
    assert written != meant  # the model's own arguments are left as they were


@pytest.mark.parametrize(
    ("schema", "written", "said"),
    [
        (obj({"n": {"type": "integer"}}), {"n": "5.5"}, 'at $.n: "5.5" is not of type "integer"'),
        (obj({"n": {"type": "integer"}}), {"n": " 5"}, "at $.n:"),  # not exactly one number
        (obj({"b": {"type": "boolean"}}), {"b": "yes"}, "at $.b:"),
        (obj({"e": {"enum": ["a", "b"]}}), {"e": "c"}, 'at $.e: "c" is not one of "a" or "b"'),
        (obj({"p": {"type": "string"}}, ["p"]), {}, 'at $: "p" is a required property'),
        (
            obj({"p": {"type": "string"}}, additionalProperties=False),
            {"p": "x", "q": 1},
            "('q' was unexpected)",
        ),
        (
            obj({"items": {"type": "array", "items": obj({"k": {"type": "string"}}, ["k"])}}),
            {"items": [{"k": "a"}, {}]},
            'at $.items[1]: "k" is a required property',
        ),
        # a wrapper key the tool declares is the tool's own property, never unwrapped
        (
            obj({"input": obj({}), "x": {"type": "string"}}, ["x"]),
            {"input": {"x": "a"}},
            '"x" is a required property',
        ),
    ],
)
def test_what_no_repair_fixes_is_a_misfit_saying_where(
    schema: dict[str, Any], written: dict[str, Any], said: str
) -> None:
    fit = fit_arguments(compiled(schema), written, "")
    assert fit.verdict is Verdict.MISFIT and said in fit.explain()


def test_a_value_no_json_could_hold_is_not_judged() -> None:
    schema = compiled(obj({"n": {"type": "integer"}}))
    assert fit_arguments(schema, {"n": b"bytes"}, "").verdict is Verdict.FITS


def test_null_or_empty_string_arguments() -> None:
    free = compiled(obj({"q": {"type": "string"}}))
    for raw in ("null", ' "" '):
        fit = fit_arguments(free, None, raw)
        assert fit.verdict is Verdict.REPAIRED and fit.arguments == {}
    needs = compiled(obj({"q": {"type": "string"}}, ["q"]))
    fit = fit_arguments(needs, None, "null")
    assert fit.verdict is Verdict.MISFIT and '"q" is a required property' in fit.explain()
    # other text that is no object stays the assembler's to report
    assert fit_arguments(free, None, '{"q": "cut').verdict is Verdict.NOT_AN_OBJECT


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://127.0.0.1:9/elsewhere.json"},  # never fetched: unchecked
        obj({"p": {"type": "string", "pattern": "(unclosed"}}),
        {"type": "strnig"},
    ],
)
def test_a_schema_the_validator_cannot_use_checks_nothing(schema: dict[str, Any]) -> None:
    assert checked_schema(schema) is None


def test_each_schema_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    schema_check.cache_clear()
    compiles: list[object] = []
    real = schema_check.jsonschema_rs.validator_for

    def counted(document: Any, **options: Any) -> Any:
        compiles.append(document)
        return real(document, **options)

    monkeypatch.setattr(schema_check.jsonschema_rs, "validator_for", counted)
    first = checked_schema(obj({"a": {"type": "string"}, "b": {"type": "integer"}}))
    # the same schema, its keys in another order (as another request might send it)
    again = checked_schema(
        {
            "required": [],
            "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
            "type": "object",
        }
    )
    assert first is again and len(compiles) == 1


@pytest.mark.parametrize(
    ("answer", "enforced"),
    [
        (b'{"version": "0.27.0"}', True),
        (b'{"version": "0.31.2rc1.dev5+gabc"}', True),
        (b'{"version": "1.0.0"}', True),
        (b'{"version": "0.26.9"}', False),
        (b'{"version": 27}', False),
        (b"<html>not found</html>", False),
    ],
)
def test_which_vllm_enforces_strict(answer: bytes, enforced: bool) -> None:
    assert vllm_enforces(answer) is enforced


def test_strict_support_by_setting_host_and_probe() -> None:
    assert StrictSupport("auto", "https://api.openai.com/v1", 300).enforced
    assert not StrictSupport("ignored", "https://api.openai.com/v1", 300).enforced
    assert StrictSupport("enforced", "http://gpu:8000/v1", 300).enforced
    learned = StrictSupport("auto", "http://gpu:8000/v1", 300)
    assert learned.needs_probe() and not learned.enforced
    learned.learn(b'{"version": "0.27.1"}')
    assert learned.enforced and not learned.needs_probe()
