"""pipe: typed output flows from step to step; only the last step is rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import (
    FileList,
    GrepResult,
    Pipe,
    PipeOutput,
    ReadResult,
    Workspace,
    WorkspaceError,
    workspace_tools,
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    files = {
        "src/a.py": "import os\n\n\ndef main():\n    return os.getcwd()\n",
        "src/b.py": "".join(f"line {i}\n" for i in range(1, 31)).replace(
            "line 20\n", "def helper():  # \\.ts$\n"
        ),
        "src/c.ts": "function main() {}\n",
        "docs/readme.md": "def main is documented here\n",
    }
    for relative, content in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(content)
    return Workspace(tmp_path, allow_write=True, allow_exec=True)


def pipe_of(ws: Workspace) -> Pipe:
    (pipe,) = [t for t in workspace_tools(ws) if isinstance(t, Pipe)]
    return pipe


async def run_pipe(ws: Workspace, *steps: dict[str, Any]) -> tuple[PipeOutput, str]:
    pipe = pipe_of(ws)
    output = await pipe.run(pipe.validate({"steps": list(steps)}))
    assert isinstance(output, PipeOutput)
    return output, pipe.render(output)


async def test_find_then_grep_then_read_file(ws: Workspace) -> None:
    output, text = await run_pipe(
        ws,
        {"tool": "find", "args": {"pattern": "*.py"}},
        {"tool": "grep", "args": {"pattern": "^def "}},
        {"tool": "read_file"},
    )
    assert isinstance(output.output, ReadResult)
    assert text == (
        "==> src/a.py <==\n"
        "     1\timport os\n     2\t\n     3\t\n     4\tdef main():\n     5\t    return os.getcwd()"
        "\n\n==> src/b.py <==\n"
        + "\n".join(f"{i:>6}\tline {i}" for i in range(15, 20))
        + "\n    20\tdef helper():  # \\.ts$\n"
        + "\n".join(f"{i:>6}\tline {i}" for i in range(21, 26))
    )


async def test_intermediate_outputs_are_typed_and_only_the_last_is_rendered(
    ws: Workspace,
) -> None:
    output, text = await run_pipe(
        ws,
        {"tool": "find", "args": {"pattern": "src/*"}},
        {"tool": "grep", "args": {"pattern": "main"}},
    )
    assert isinstance(output.output, GrepResult) and output.tool == "grep"
    assert text == "src/a.py:4:def main():\nsrc/c.ts:1:function main() {}"


async def test_find_restricts_grep_to_its_files(ws: Workspace) -> None:
    _, text = await run_pipe(
        ws,
        {"tool": "find", "args": {"pattern": "*.md"}},
        {"tool": "search_files", "args": {"pattern": "main", "glob": "*"}},
    )
    assert text == "docs/readme.md:1:def main is documented here"


async def test_grep_then_grep_searches_the_files_that_matched(ws: Workspace) -> None:
    _, text = await run_pipe(
        ws,
        {"tool": "grep", "args": {"pattern": "import os"}},
        {"tool": "grep", "args": {"pattern": "return"}},
    )
    assert text == "src/a.py:5:    return os.getcwd()"


async def test_grep_then_find_filters_the_matched_files(ws: Workspace) -> None:
    output, text = await run_pipe(
        ws,
        {"tool": "grep", "args": {"pattern": "main"}},
        {"tool": "find", "args": {"pattern": "*.ts"}},
    )
    assert isinstance(output.output, FileList)
    assert text == "src/c.ts"


async def test_find_then_read_file_reads_each_window(ws: Workspace) -> None:
    _, text = await run_pipe(
        ws,
        {"tool": "find", "args": {"pattern": "*.ts"}},
        {"tool": "read_file", "args": {"limit": 1}},
    )
    assert text == "==> src/c.ts <==\n     1\tfunction main() {}"


async def test_a_later_path_narrows_the_files(ws: Workspace) -> None:
    _, text = await run_pipe(
        ws,
        {"tool": "grep", "args": {"pattern": "main"}},
        {"tool": "grep", "args": {"pattern": "def", "path": "docs"}},
    )
    assert text == "docs/readme.md:1:def main is documented here"


async def test_an_empty_step_ends_the_pipe_and_says_which(ws: Workspace) -> None:
    output, text = await run_pipe(
        ws,
        {"tool": "find", "args": {"pattern": "*.rs"}},
        {"tool": "grep", "args": {"pattern": "x"}},
        {"tool": "read_file"},
    )
    assert output.stopped_early
    assert text == (
        "[pipe stopped after step 1 of 3 (find): it found nothing to pass on]\n"
        "[no files match *.rs under .]"
    )


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [{"tool": "exec", "args": {"command": "ls"}}],
            "'exec' cannot run in a pipe; pipe steps can use: find, grep, read_file, search_files",
        ),
        ([{"tool": "edit_file", "args": {}}], "'edit_file' cannot run in a pipe"),
        ([{"tool": "pipe", "args": {}}], "'pipe' cannot run in a pipe"),
        (
            [
                {"tool": "read_file", "args": {"path": "src/a.py"}},
                {"tool": "grep", "args": {"pattern": "x"}},
            ],
            "step 2 (grep) cannot take the output of step 1 (read_file); grep takes the "
            "output of: find, grep or search_files",
        ),
        ([{"tool": "grep", "args": {}}], "step 1 (grep): invalid arguments for grep: pattern"),
        (
            [{"tool": "find", "args": {"pattern": "*", "path": "../"}}],
            "step 1 (find): path '../' uses '..'",
        ),
    ],
)
async def test_pipe_errors_name_the_step(
    ws: Workspace, steps: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(WorkspaceError) as caught:
        await run_pipe(ws, *steps)
    assert message in str(caught.value)


async def test_reading_many_files_stops_at_the_output_cap_and_says_so(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text("".join(f"{'z' * 60} {n}\n" for n in range(10)))
    ws = Workspace(tmp_path, max_output_chars=1500)
    _, text = await run_pipe(
        ws, {"tool": "find", "args": {"pattern": "*.txt"}}, {"tool": "read_file"}
    )
    assert text.startswith("==> f0.txt <==\n     1\t" + "z" * 60 + " 0\n")
    assert text.endswith("more files not shown: output cap reached; read them one by one]")
    assert "==> f5.txt <==" not in text
