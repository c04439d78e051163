"""`loop/` receives only checked data (issue 24): the 400s a request can earn are raised by the
server's preparation layer (`server/responses/prepare/validation/`), so nothing in `loop/` raises an HTTP-shaped
error or names a request field (`param=`) for one."""

from __future__ import annotations

import ast
from pathlib import Path

LOOP = Path(__file__).resolve().parents[2] / "src" / "toolwire" / "loop"
HTTP_SHAPED = {"InvalidRequestError", "NotFoundError", "BadRequest"}


def test_loop_raises_no_http_shaped_errors() -> None:
    found = []
    for path in sorted(LOOP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id in HTTP_SHAPED:
                found.append(f"{path.name}:{node.lineno} {node.id}")
            elif isinstance(node, ast.alias) and node.name in HTTP_SHAPED:
                found.append(f"{path.name} imports {node.name}")
            elif isinstance(node, ast.keyword) and node.arg == "param":
                found.append(f"{path.name}:{node.value.lineno} param=")
    assert found == []
