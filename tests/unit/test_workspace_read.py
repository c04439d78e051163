"""read_file: `cat -n` text, byte for byte; binary, huge, empty and odd files reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.executor import ToolExecutor
from toolwire.tools.workspace import ReadFile, ReadResult, Workspace, WorkspaceError
from toolwire.transcript import ToolCall


async def read(ws: Workspace, **arguments: Any) -> str:
    tool = ReadFile(ws)
    output = await tool.run(tool.validate(arguments))
    assert isinstance(output, ReadResult)
    return tool.render(output)


async def test_cat_n_rendering_is_exact(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n\treturn 1\n\nx = 2\n")
    assert await read(Workspace(tmp_path), path="a.py") == (
        "     1\tdef f():\n     2\t\treturn 1\n     3\t\n     4\tx = 2"
    )


async def test_backslashes_and_quotes_are_shown_byte_for_byte(tmp_path: Path) -> None:
    line = 'export const TS = /\\.ts$/; // "quoted" \\n not a newline \\\\ two'
    (tmp_path / "find.ts").write_text(line + "\n")
    text = await read(Workspace(tmp_path), path="find.ts")
    assert text == f"     1\t{line}"
    assert "\\.ts$" in text and "\\\\.ts$" not in text
    assert text.encode() == b"     1\t" + line.encode()


async def test_backslashes_survive_the_envelope(tmp_path: Path) -> None:
    (tmp_path / "find.ts").write_text("const re = /\\.ts$/;\n")
    executor = ToolExecutor([ReadFile(Workspace(tmp_path))])
    call = ToolCall("c1", "read_file", {"path": "find.ts"}, '{"path": "find.ts"}')
    (result,) = await executor.execute([call])
    assert result.ok
    assert result.text.endswith("output:\n     1\tconst re = /\\.ts$/;")


async def test_line_numbers_are_right_aligned_to_width_6(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("".join(f"l{i}\n" for i in range(1, 1_000_001 // 100)))
    text = await read(Workspace(tmp_path), path="many.txt", offset=9998, limit=2)
    assert text.splitlines()[:2] == ["  9998\tl9998", "  9999\tl9999"]


async def test_offset_and_limit_window_says_how_to_read_on(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = await read(Workspace(tmp_path), path="f.txt", offset=3, limit=2)
    assert text == (
        "     3\tline 3\n     4\tline 4\n[lines 3-4 of 10 shown; read on with offset=5]"
    )
    assert await read(Workspace(tmp_path), path="f.txt", offset=9) == (
        "     9\tline 9\n    10\tline 10"
    )


async def test_offset_past_the_end(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    text = await read(Workspace(tmp_path), path="f.txt", offset=5)
    assert text == "[f.txt has 2 lines; offset 5 is past the end]"


async def test_no_trailing_newline_crlf_and_empty(tmp_path: Path) -> None:
    (tmp_path / "nonl.txt").write_text("a\nb")
    (tmp_path / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (tmp_path / "empty.txt").write_text("")
    ws = Workspace(tmp_path)
    assert await read(ws, path="nonl.txt") == "     1\ta\n     2\tb"
    assert await read(ws, path="crlf.txt") == "     1\tone\n     2\ttwo"
    assert await read(ws, path="empty.txt") == "[empty.txt is empty]"


async def test_binary_files_are_reported_not_dumped(tmp_path: Path) -> None:
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(100))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    ws = Workspace(tmp_path)
    assert await read(ws, path="img.png") == (
        "[img.png is a binary file (116 bytes): it contains NUL bytes; not shown]"
    )
    assert await read(ws, path="latin1.txt") == (
        "[latin1.txt is a binary file (5 bytes): it is not valid UTF-8 text (byte 3); not shown]"
    )


async def test_only_the_first_8_kib_are_sniffed_for_nul(tmp_path: Path) -> None:
    (tmp_path / "late.txt").write_bytes(b"a" * 99 + b"\n" + b"b" * 9000 + b"\n\x00\n")
    text = await read(Workspace(tmp_path, max_line_chars=10_000), path="late.txt")
    assert text.endswith("     3\t\x00")  # text by the 8 KiB rule; the envelope sanitizes NUL


async def test_huge_file_is_reported_and_a_window_still_works(tmp_path: Path) -> None:
    lines = [f"row {i:05d} " + "x" * 40 for i in range(1, 5001)]
    (tmp_path / "big.log").write_text("\n".join(lines) + "\n")
    size = (tmp_path / "big.log").stat().st_size
    ws = Workspace(tmp_path, max_read_bytes=64 * 1024)
    assert await read(ws, path="big.log") == (
        f"[big.log is {size / 1024:.1f} KiB ({size} bytes), over the 64.0 KiB read cap; not shown whole. "
        "Pass offset and limit to read a window (for example offset=1, limit=200), or grep it]"
    )
    window = await read(ws, path="big.log", offset=4000, limit=3)
    assert window == (
        f"  4000\t{lines[3999]}\n  4001\t{lines[4000]}\n  4002\t{lines[4001]}\n"
        "[lines 4000-4002 shown; read on with offset=4003]"
    )
    tail = await read(ws, path="big.log", offset=4999, limit=10)
    assert tail == f"  4999\t{lines[4998]}\n  5000\t{lines[4999]}"


async def test_output_cap_cuts_by_lines_and_says_where_to_continue(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"{'y' * 90}\n" for _ in range(100)))
    text = await read(Workspace(tmp_path, max_output_chars=1300), path="f.txt")
    shown = [line for line in text.splitlines() if line[:6].strip().isdigit()]
    assert 5 <= len(shown) < 100
    assert text.endswith(
        f"[lines 1-{len(shown)} of 100 shown (output cap of 1300 characters); "
        f"read on with offset={len(shown) + 1}]"
    )


async def test_long_lines_are_cut_with_a_marker(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("z" * 5000 + "\n")
    text = await read(Workspace(tmp_path, max_line_chars=100), path="min.js")
    assert text == "     1\t" + "z" * 100 + "… [line cut: 4900 more characters]"


async def test_missing_file_suggests_close_names(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("a: 1\n")
    with pytest.raises(
        WorkspaceError, match=r"no such file: config.yml\. Did you mean: config.yaml\?"
    ):
        await read(Workspace(tmp_path), path="config.yml")


async def test_directory_is_an_error_pointing_at_find(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with pytest.raises(WorkspaceError, match="src is a directory; use find"):
        await read(Workspace(tmp_path), path="src")


async def test_unknown_arguments_are_refused(tmp_path: Path) -> None:
    from toolwire.tools.base import ToolArgumentsError

    with pytest.raises(ToolArgumentsError, match="lines"):
        ReadFile(Workspace(tmp_path)).validate({"path": "a", "lines": 3})
