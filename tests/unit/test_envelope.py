"""The envelope: exact shape, strings untouched, truncation marked inline, sanitized text."""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.tools.envelope import EnvelopeLimits, render_envelope, truncate
from toolwire.tools.readable import to_text


def test_success_shape_is_exact() -> None:
    assert render_envelope("read_file", ok=True, output="line 1\nline 2") == (
        "status:\nsuccess\n\ntoolName:\nread_file\n\nerror:\n\n\noutput:\nline 1\nline 2"
    )


def test_error_shape_is_exact() -> None:
    assert render_envelope("grep", ok=False, error="bad regex: (") == (
        "status:\nerror\n\ntoolName:\ngrep\n\nerror:\nbad regex: (\n\noutput:\n"
    )


def test_strings_are_not_json_encoded() -> None:
    text = render_envelope("read_file", ok=True, output='const re = /\\.ts$/; "quoted"\ttab')
    assert text.endswith('output:\nconst re = /\\.ts$/; "quoted"\ttab')


def test_truncation_keeps_head_and_tail_and_says_what_was_cut() -> None:
    lines = [f"line {i}" for i in range(1000)]
    cut = truncate("\n".join(lines), EnvelopeLimits(max_chars=100_000, max_lines=100))
    assert cut.startswith("line 0\nline 1\n")
    assert cut.endswith("line 998\nline 999")
    assert "line 500" not in cut
    assert "[… truncated:" in cut and "lines cut from the middle …]" in cut


def test_truncation_by_characters() -> None:
    text = "a" * 5000 + "MIDDLE" + "z" * 5000
    cut = truncate(text, EnvelopeLimits(max_chars=1000))
    assert cut.startswith("a" * 600) and cut.endswith("z" * 400)
    assert "MIDDLE" not in cut
    assert "9000 characters" in cut or "truncated: 9006" in cut


def test_short_text_is_untouched() -> None:
    assert truncate("short", EnvelopeLimits(max_chars=10, max_lines=3)) == "short"


def test_nul_and_lone_surrogates_are_sanitized_once() -> None:
    text = render_envelope("x", ok=True, output="a\x00b\ud800c")
    assert text.endswith("output:\na\ufffdb\ufffdc")
    text.encode("utf-8")  # must not raise


@dataclass
class Hit:
    path: str
    line: int


def test_readable_default_rendering_is_not_json() -> None:
    assert to_text("plain \\.ts$") == "plain \\.ts$"
    assert to_text(b"bytes \xff") == "bytes \ufffd"
    rendered = to_text({"ok": True, "hits": [Hit("a.py", 3)], "diff": "-a\n+b", "none": None})
    assert (
        rendered
        == "ok: true\nhits:\n  -\n    path: a.py\n    line: 3\ndiff: |\n  -a\n  +b\nnone: null"
    )
