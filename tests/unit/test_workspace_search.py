"""find, grep and search_files: exact text, .gitignore, and the ripgrep and pure-Python
backends producing identical output on the same tree."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolwire.tools.workspace import (
    Find,
    Grep,
    GrepResult,
    SearchFiles,
    Workspace,
    WorkspaceError,
    find_ripgrep,
)
from toolwire.tools.workspace.globs import Glob
from toolwire.tools.workspace.ignore import IgnoreRules
from toolwire.tools.workspace.search import _RG_FLAGS, _RG_WALK_FLAGS

RG = find_ripgrep()
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep (the `ripgrep` package) not installed")


def write(root: Path, relative: str, content: str | bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree with everything that can make two searchers disagree."""
    root = tmp_path / "ws"
    files: dict[str, str | bytes] = {
        ".gitignore": "build/\n*.log\n!keep.log\n/top-only.txt\nnode_modules/\n",
        "src/.gitignore": "generated/\n*.tmp\n",
        "src/app.py": "import os\n\ndef main():\n    print('hello world')\n    return 0\n",
        "src/util.py": "HELLO = 'hello'\n\n\ndef hello():\n    return HELLO\n",
        "src/find.ts": 'export const RE = /\\.ts$/;\nconst s = "a\\\\b";\n',
        "src/generated/out.py": "hello from generated\n",
        "src/scratch.tmp": "hello tmp\n",
        "src/deep/a/b/c.py": "# hello deep\n",
        "a.txt": "hello a.txt\n",
        "a/b.txt": "hello a/b\n",
        "keep.log": "hello keep\n",
        "drop.log": "hello drop\n",
        "top-only.txt": "hello top\n",
        "sub/top-only.txt": "hello nested top-only\n",
        "build/x.py": "hello build\n",
        "node_modules/pkg/index.js": "hello module\n",
        ".github/workflows/ci.yml": "run: echo hello\n",
        ".git/config": "hello git\n",
        "crlf.txt": b"hello crlf\r\nsecond\r\nhello$\r\n",
        "latin.txt": b"hello caf\xe9\n",
        "image.bin": b"\x89PNG\x00\x00hello\n",
        "late_nul.txt": b"hello early\n" + b"x" * 9000 + b"\n\x00hello late\n",
        "nonl.txt": "last hello",
        "empty.txt": "",
        "ctx.txt": "".join(
            f"line {i}{' hello' if i in (3, 5, 12, 30) else ''}\n" for i in range(1, 41)
        ),
        "unicode.txt": "Grüße HELLO naïve\nплохо hello\n",
        "long.txt": "hello " + "w" * 3000 + "\n",
        "vendor/lib/.git/HEAD": "ref: refs/heads/main\n",
        "vendor/lib/.gitignore": "*.tmp\n",
        "vendor/lib/nested.log": "hello nested repo log\n",
        "vendor/lib/skip.tmp": "hello nested tmp\n",
        "vendor/sub2/.git": "gitdir: ../../.git/modules/sub2\n",
        "vendor/sub2/mod.log": "hello submodule log\n",
        "vendor/plain.log": "hello vendor log\n",
    }
    for relative, content in files.items():
        write(root, relative, content)
    (root / "link.py").symlink_to(root / "src" / "app.py")
    return root


async def run(tool_type: type[Any], ws: Workspace, **arguments: Any) -> str:
    tool = tool_type(ws)
    return str(tool.render(await tool.run(tool.validate(arguments))))


# -- find ---------------------------------------------------------------------------------------


async def test_find_lists_sorted_root_relative_paths_honouring_gitignore(tree: Path) -> None:
    assert await run(Find, Workspace(tree), pattern="*.py") == (
        "src/app.py\nsrc/deep/a/b/c.py\nsrc/util.py"
    )
    assert await run(Find, Workspace(tree), pattern="*.txt") == "\n".join(
        [
            "a/b.txt",
            "a.txt",
            "crlf.txt",
            "ctx.txt",
            "empty.txt",
            "late_nul.txt",
            "latin.txt",
            "long.txt",
            "nonl.txt",
            "sub/top-only.txt",
            "unicode.txt",
        ]
    )


async def test_find_globs_with_slashes_braces_and_a_path(tree: Path) -> None:
    ws = Workspace(tree)
    assert await run(Find, ws, pattern="src/*.{py,ts}") == "src/app.py\nsrc/find.ts\nsrc/util.py"
    assert await run(Find, ws, pattern="**/b/*.py") == "src/deep/a/b/c.py"
    assert await run(Find, ws, pattern="*.py", path="src/deep") == "src/deep/a/b/c.py"
    assert await run(Find, ws, pattern="*.yml") == ".github/workflows/ci.yml"
    assert await run(Find, ws, pattern="*.log") == "keep.log"
    assert await run(Find, ws, pattern="*.rs") == "[no files match *.rs under .]"


async def test_find_skips_git_and_symlinks(tree: Path) -> None:
    listed = (await run(Find, Workspace(tree), pattern="**")).splitlines()
    assert "link.py" not in listed
    assert not any(path.startswith(".git/") for path in listed)
    assert ".gitignore" in listed and "src/.gitignore" in listed


async def test_find_in_an_ignored_directory_named_explicitly(tree: Path) -> None:
    assert await run(Find, Workspace(tree), pattern="*", path="node_modules") == (
        "node_modules/pkg/index.js"
    )


async def test_find_caps_results_and_says_so(tree: Path) -> None:
    text = await run(Find, Workspace(tree, max_find_results=2), pattern="*.txt")
    assert text == "a/b.txt\na.txt\n[9 more files not shown; narrow the pattern or the path]"


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "c.pyc", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("**", "any/thing", True),
        ("docs/", "docs/a/b.md", True),
        ("./src/*.py", "src/a.py", True),
        ("test_?.py", "x/test_1.py", True),
        ("[!a]*.md", "b.md", True),
        ("[!a]*.md", "a.md", False),
        ("*.{ts,tsx}", "x.tsx", True),
        ("\\*.md", "*.md", True),
        ("\\*.md", "a.md", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert Glob(pattern).matches(path) is expected


def test_bad_globs_are_explained() -> None:
    with pytest.raises(WorkspaceError, match="unclosed"):
        Glob("*.{py,ts")
    with pytest.raises(WorkspaceError, match="empty"):
        Glob("  ")


# -- grep: exact text -----------------------------------------------------------------------


@pytest.fixture(params=["ripgrep", "python"])
def ws(request: pytest.FixtureRequest, tree: Path) -> Workspace:
    if request.param == "ripgrep" and RG is None:
        pytest.skip("ripgrep not installed")
    return Workspace(tree, use_ripgrep=request.param == "ripgrep")


async def test_grep_lines_are_path_line_text(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern="hello", path="src") == (
        "src/app.py:4:    print('hello world')\n"
        "src/deep/a/b/c.py:1:# hello deep\n"
        "src/util.py:1:HELLO = 'hello'\n"
        "src/util.py:4:def hello():"
    )


async def test_grep_shows_backslashes_byte_for_byte(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern=r"\\\.ts\$") == "src/find.ts:1:export const RE = /\\.ts$/;"
    assert await run(Grep, ws, pattern="\\.ts$", fixed_strings=True) == (
        "src/find.ts:1:export const RE = /\\.ts$/;"
    )
    assert await run(Grep, ws, pattern='"a', path="src/find.ts") == (
        'src/find.ts:2:const s = "a\\\\b";'
    )


async def test_grep_context_lines_and_group_separators(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern="hello", path="ctx.txt", context=1) == "\n".join(
        [
            "ctx.txt-2-line 2",
            "ctx.txt:3:line 3 hello",
            "ctx.txt-4-line 4",
            "ctx.txt:5:line 5 hello",
            "ctx.txt-6-line 6",
            "--",
            "ctx.txt-11-line 11",
            "ctx.txt:12:line 12 hello",
            "ctx.txt-13-line 13",
            "--",
            "ctx.txt-29-line 29",
            "ctx.txt:30:line 30 hello",
            "ctx.txt-31-line 31",
        ]
    )


async def test_grep_max_matches_keeps_after_context_and_says_more_exist(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern="hello", path="ctx.txt", context=1, max_matches=2) == (
        "ctx.txt-2-line 2\nctx.txt:3:line 3 hello\nctx.txt-4-line 4\nctx.txt:5:line 5 hello\n"
        "ctx.txt-6-line 6\n[stopped after 2 matches; more exist. Narrow the pattern, the path "
        "or the glob, or raise max_matches]"
    )
    assert await run(Grep, ws, pattern="hello", path="ctx.txt", max_matches=4) == (
        "ctx.txt:3:line 3 hello\nctx.txt:5:line 5 hello\nctx.txt:12:line 12 hello\n"
        "ctx.txt:30:line 30 hello"
    )


async def test_grep_skips_binary_ignored_and_git(ws: Workspace) -> None:
    text = await run(Grep, ws, pattern="hello")
    paths = {line.split(":", 1)[0] for line in text.splitlines()}
    assert paths == {
        ".github/workflows/ci.yml",
        "a.txt",
        "a/b.txt",
        "crlf.txt",
        "ctx.txt",
        "keep.log",
        "latin.txt",
        "long.txt",
        "nonl.txt",
        "src/app.py",
        "src/deep/a/b/c.py",
        "src/util.py",
        "sub/top-only.txt",
        "unicode.txt",
    }


async def test_grep_skips_a_file_with_a_nul_anywhere_even_after_matches(
    ws: Workspace,
) -> None:
    write(ws.root, "tail_nul.txt", b"hello\n" + b"y" * 200_000 + b"\n\x00")
    assert await run(Grep, ws, pattern="hello", path="tail_nul.txt") == "[no matches]"
    assert await run(Grep, ws, pattern="early", path="late_nul.txt") == "[no matches]"


async def test_grep_crlf_invalid_utf8_and_no_final_newline(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern="hello", path="crlf.txt") == (
        "crlf.txt:1:hello crlf\ncrlf.txt:3:hello$"
    )
    assert await run(Grep, ws, pattern="caf", path="latin.txt") == "latin.txt:1:hello caf\ufffd"
    assert await run(Grep, ws, pattern="hello$", path="nonl.txt") == "nonl.txt:1:last hello"


async def test_grep_options(ws: Workspace) -> None:
    assert await run(Grep, ws, pattern="HELLO", path="unicode.txt") == (
        "unicode.txt:1:Grüße HELLO naïve"
    )
    assert await run(Grep, ws, pattern="hello", path="unicode.txt", ignore_case=True) == (
        "unicode.txt:1:Grüße HELLO naïve\nunicode.txt:2:плохо hello"
    )
    assert await run(Grep, ws, pattern="hello", glob="*.py", path="src") == (
        "src/app.py:4:    print('hello world')\nsrc/deep/a/b/c.py:1:# hello deep\n"
        "src/util.py:1:HELLO = 'hello'\nsrc/util.py:4:def hello():"
    )
    assert await run(Grep, ws, pattern="zzz_absent") == "[no matches]"


async def test_search_files_is_grep_restricted_to_a_glob(ws: Workspace) -> None:
    assert await run(SearchFiles, ws, pattern="hello", glob="*.{yml,log}") == (
        ".github/workflows/ci.yml:1:run: echo hello\nkeep.log:1:hello keep"
    )


async def test_grep_long_lines_are_cut(ws: Workspace) -> None:
    ws.max_line_chars = 20
    assert await run(Grep, ws, pattern="hello", path="long.txt") == (
        "long.txt:1:hello wwwwwwwwwwwwww… [line cut: 2986 more characters]"
    )


async def test_grep_errors(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="line break"):
        await run(Grep, ws, pattern="a\nb")
    with pytest.raises(WorkspaceError, match="no such file or directory: nope"):
        await run(Grep, ws, pattern="a", path="nope")
    with pytest.raises(WorkspaceError, match="fixed_strings=true"):
        await run(Grep, ws, pattern="(unclosed")


# -- the two backends agree ------------------------------------------------------------------

QUERIES: list[dict[str, Any]] = [
    {"pattern": "hello"},
    {"pattern": "hello", "context": 2},
    {"pattern": "hello", "context": 3, "max_matches": 5},
    {"pattern": "hello", "max_matches": 1},
    {"pattern": "HELLO", "ignore_case": True},
    {"pattern": "\\.ts$", "fixed_strings": True},
    {"pattern": r"\bdef \w+\("},
    {"pattern": "^line [0-9]+$", "context": 1},
    {"pattern": "hello$"},
    {"pattern": "hello", "path": "src"},
    {"pattern": "hello", "path": "node_modules"},
    {"pattern": "hello", "path": "crlf.txt"},
    {"pattern": "hello", "glob": "*.txt", "context": 1},
    {"pattern": "hello", "glob": "src/**/*.py"},
    {"pattern": "", "path": "ctx.txt", "max_matches": 3},
    {"pattern": "[éа-я]+"},
]


@needs_rg
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: repr(q))
async def test_ripgrep_and_python_fallback_render_identically(
    tree: Path, query: dict[str, Any]
) -> None:
    fast = Workspace(tree, max_line_chars=50)
    slow = Workspace(tree, max_line_chars=50, use_ripgrep=False)
    assert fast.rg_path is not None and slow.rg_path is None
    grep_fast, grep_slow = Grep(fast), Grep(slow)
    out_fast = await grep_fast.run(grep_fast.validate(query))
    out_slow = await grep_slow.run(grep_slow.validate(query))
    assert isinstance(out_fast, GrepResult) and out_fast.backend == "ripgrep"
    assert isinstance(out_slow, GrepResult) and out_slow.backend == "python"
    assert grep_fast.render(out_fast) == grep_slow.render(out_slow)
    assert out_fast.lines == out_slow.lines


@needs_rg
def test_ripgrep_walk_sees_the_same_files_as_the_python_walker(tree: Path) -> None:
    assert RG is not None
    listed = subprocess.run(
        [RG, "--files", *_RG_WALK_FLAGS, *(f for f in _RG_FLAGS if f != "--json"), "."],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    from_rg = [path.removeprefix("./") for path in listed if path]
    assert from_rg == list(IgnoreRules(tree.resolve()).walk(""))
