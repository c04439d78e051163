"""No import circles among toolwire's modules and the benchmark scripts, and no arrows up from
the lower floors (DESIGN.md: dependencies point down). Every import counts, also one inside a
function: a circle that only closes at call time is still a circle."""

from __future__ import annotations

import ast
from functools import cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for base, folder in ((ROOT / "src", ROOT / "src" / "toolwire"), (ROOT, ROOT / "benchmarks")):
        for path in folder.rglob("*.py"):
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue  # benchmarks/.venv-*: the peers' virtualenvs run.py creates
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
            if parts[0] == "benchmarks":  # the scripts import each other by bare name
                found[".".join(parts[1:])] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            subs = [f"{module}.{alias.name}" for alias in node.names]
            if all(sub in known for sub in subs):
                named.update(subs)  # `from package import module`: that module
            else:
                named.add(module)
    targets = set()
    for module in named:
        while module and module not in known:
            module = module.rpartition(".")[0]
        if module and module != name:
            targets.add(module)
    return targets


@cache
def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_there_are_no_import_circles() -> None:
    try:
        TopologicalSorter(_graph()).prepare()
    except CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("toolwire.wire", "toolwire."),
        ("toolwire.net", "toolwire."),
        ("toolwire.upstream", "toolwire.observe"),
        ("toolwire.tools", "toolwire.observe"),
        ("toolwire.loop", "toolwire.server"),
        ("toolwire.upstream", "toolwire.server"),
    ],
)
def test_no_arrow_points_up(lower: str, upper: str) -> None:
    graph = _graph()
    up = [
        (source, target)
        for source, targets in graph.items()
        for target in targets
        if source.startswith(lower)
        and target.startswith(upper)
        and not (upper == "toolwire." and target.startswith(lower))
    ]
    assert up == []


#: The server's wings: one per door, and the operator's (`/metrics`, `/ui`). A wing takes what
#: it shares with the others from the composed `Runtime`, `gate/` and `http/`, never from
#: another wing.
WINGS = ("responses", "chat", "messages", "gemini", "operator")
#: The root of `server/` composes the wings; nothing else lies there.
ROOT_FILES = {"__init__", "app", "handover", "main", "startup", "workers"}


def _wing(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["toolwire", "server"] or len(parts) < 3:
        return None
    return parts[2]


def test_wings_never_import_each_other() -> None:
    crossing = [
        (source, target)
        for source, targets in _graph().items()
        for target in targets
        if _wing(source) in WINGS and _wing(target) in WINGS and _wing(source) != _wing(target)
    ]
    assert crossing == []


@pytest.mark.parametrize("floor", ["gate", "http"])
def test_shared_floors_import_no_wing(floor: str) -> None:
    """`gate/` (what every request crosses) and `http/` (the shared plumbing) serve every
    wing: they know none."""
    into_wings = [
        (source, target)
        for source, targets in _graph().items()
        for target in targets
        if _wing(source) == floor and (_wing(target) in WINGS or _wing(target) in ROOT_FILES)
    ]
    assert into_wings == []


def test_the_server_root_holds_only_the_composition() -> None:
    root = ROOT / "src" / "toolwire" / "server"
    loose = {path.stem for path in root.glob("*.py")} - ROOT_FILES
    assert loose == set()
    folders = {path.name for path in root.iterdir() if path.is_dir() and path.name[0] != "_"}
    assert folders <= {*WINGS, "gate", "http"}, folders - {*WINGS, "gate", "http"}


def test_nothing_below_the_server_imports_it() -> None:
    below = [
        (source, target)
        for source, targets in _graph().items()
        for target in targets
        if source.startswith("toolwire.")
        and not source.startswith(("toolwire.server", "toolwire.cli", "toolwire.demo"))
        and target.startswith("toolwire.server")
    ]
    assert below == []
