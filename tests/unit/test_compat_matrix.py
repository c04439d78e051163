"""docs/compatibility.md is made from outcomes, not by hand: a cell is ✓ only when every test
of it passed, ✗ (with the failing test named) when one failed, n/a (with why) where the agent
cannot ask for the feature, blank when none ran."""

from __future__ import annotations

import pytest

from tests.compat_matrix import Matrix


def test_cells_follow_the_outcomes() -> None:
    matrix = Matrix()
    matrix.add("Claude Code", "Anthropic Messages", ("tool use", "PDF"), "t::ok", True)
    matrix.add("Claude Code", "Anthropic Messages", ("PDF",), "t::pdf_broke", False)
    page = matrix.render("2026-11-27")
    row = next(line for line in page.splitlines() if line.startswith("| Claude Code"))
    cells = [cell.strip() for cell in row.split("|")[4:-2]]
    # plain, streaming, tool use, parallel calls, leaks, thinking, images, PDF, ...
    assert cells[:8] == ["", "", "✓", "", "", "", "", "✗"]
    assert "- Claude Code, Anthropic Messages, PDF: `t::pdf_broke`" in page


def test_an_unknown_feature_is_refused() -> None:
    with pytest.raises(ValueError, match="teleport"):
        Matrix().add("a", "d", ("teleport",), "t", True)


def test_what_an_agent_cannot_ask_for_is_na_not_blank() -> None:
    matrix = Matrix()
    matrix.add("qwen-code", "Chat Completions", ("tool use",), "t::ok", True)
    page = matrix.render("2026-11-27")
    row = next(line for line in page.splitlines() if line.startswith("| qwen-code"))
    cells = [cell.strip() for cell in row.split("|")[4:-2]]
    assert cells[2] == "✓" and cells[-1] == "n/a" and cells[3] == ""  # web search; parallel
    assert "- qwen-code, web search: its web search" in page
