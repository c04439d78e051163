"""Custom tools' grammars checked as OpenAI constrains them (LLGuidance: Lark, Rust regex)."""

from __future__ import annotations

import pytest

from toolwire.loop.grammars import grammar_problem

SQL = r"""start: "SELECT " COLUMN " FROM " TABLE (" WHERE " COLUMN "=" NUMBER)?
COLUMN: /[a-z_]+/
TABLE: /[a-z_]+/
NUMBER: /[0-9]+/
"""


@pytest.mark.parametrize("text", ["SELECT id FROM users", "SELECT id FROM users WHERE id=3"])
def test_text_in_a_lark_grammar_passes(text: str) -> None:
    assert grammar_problem("lark", SQL, text) is None


def test_text_outside_a_lark_grammar_says_where() -> None:
    problem = grammar_problem("lark", SQL, "SELECT id FROM users;\nDROP TABLE users")
    assert problem is not None and "line 1, column 21" in problem and "';\\nDROP" in problem
    assert "ends too early" in (grammar_problem("lark", SQL, "SELECT id FROM") or "")


def test_a_regex_must_match_the_whole_text() -> None:
    assert grammar_problem("regex", r"\d{4}-\d{2}-\d{2}", "2026-11-23") is None
    assert grammar_problem("regex", r"\d{4}-\d{2}-\d{2}", "on 2026-11-23") is not None
    assert grammar_problem("regex", r"\d{4}-\d{2}-\d{2}", "2026-11-23!") is not None


@pytest.mark.parametrize(("syntax", "definition"), [("lark", "start: nowhere"), ("cfg", "x")])
def test_a_grammar_that_cannot_be_compiled_is_not_enforced(syntax: str, definition: str) -> None:
    assert grammar_problem(syntax, definition, "anything") is None
