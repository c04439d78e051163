"""Calls written as Python (`[f(a=1), g()]`, OLMo's one call per line): parsed with `ast` and
read with `ast.literal_eval` only, never evaluated. Kept apart because it is the one scanner that
must be safe against hostile code.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any, ClassVar

from toolwire.leaks.scanning.core import RawCall, valid_name

# -- pythonic -------------------------------------------------------------------------------------


class _JsonNames(ast.NodeTransformer):
    """`true`/`false`/`null` as OLMo writes them become Python constants; sets become lists."""

    _MAP: ClassVar[dict[str, Any]] = {"true": True, "false": False, "null": None}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._MAP:
            return ast.copy_location(ast.Constant(self._MAP[node.id]), node)
        return node

    def visit_Set(self, node: ast.Set) -> ast.AST:
        """A set (`tags={'a', 'b'}`) as a list in the order written: JSON has no sets."""
        elts = [self.visit(e) for e in node.elts]
        return ast.copy_location(ast.List(elts=elts, ctx=ast.Load()), node)


def _jsonable(value: Any) -> Any:
    """A literal as JSON data: tuples become lists; sets, bytes, complex, non-str keys fail."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    raise ValueError(f"not JSON data: {type(value).__name__}")


def literal_value(node: ast.expr) -> Any:
    """A keyword value via `ast.literal_eval` (never eval), JSON's `true`/`false`/`null` allowed."""
    try:
        return _jsonable(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        fixed = _JsonNames().visit(node)
        try:
            return _jsonable(ast.literal_eval(fixed))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ValueError("not a literal") from exc


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _parse(src: str, listed: bool) -> ast.AST | None:
    try:
        with warnings.catch_warnings():
            # Prose parsed as Python warns ("invalid decimal literal"); that is only noise here.
            warnings.simplefilter("ignore")
            return ast.parse(src, mode="eval" if listed else "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


# What may follow a string's closing quote: a separator, a closing bracket, or the end.
_CLOSES = re.compile(r"""[ \t]*(?:[,)\]}:]|$)""")
_ARG_AFTER_COMMA = re.compile(
    r"""\s*(?:[A-Za-z_][\w.]*\s*=|["'\d\-\[{(]|True|False|None|[)\]}]|$)"""
)
_LEADING_ZEROS = re.compile(r"(?<=[=(\[,:\s])-?0+(?=\d)")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\x00": "\\x00"}


def repair_python_literals(src: str) -> str | None:
    """Calls as small models write them, made Python (LFM2's fixtures in vLLM's parser tests):
    raw newlines, carriage returns and NULs inside a string escaped; a quote of the string's
    own kind that does not end it (`'sed -n '1,5p' f'`) escaped, a quote ending a string only
    where a separator, a closing bracket or the end follows; leading zeros dropped from numbers
    (`month=07`). None when nothing needed repair (or a triple-quoted string is involved)."""
    out: list[str] = []
    quote = ""
    changed = False
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        if not quote:
            if ch in "\"'":
                if src.startswith(ch * 3, i):
                    return None
                quote = ch
            out.append(ch)
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            out.append(src[i : i + 2])
            i += 2
            continue
        if ch == quote:
            after = _CLOSES.match(src, i + 1)
            closes = after is not None and (
                after.group().strip() != "," or _ARG_AFTER_COMMA.match(src, after.end()) is not None
            )
            if closes:
                quote = ""
                out.append(ch)
            else:
                out.append("\\" + ch)
                changed = True
            i += 1
            continue
        escaped = _ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
            changed = True
        else:
            out.append(ch)
        i += 1
    text = "".join(out)
    unzeroed = _LEADING_ZEROS.sub(lambda m: "-" if m.group().startswith("-") else "", text)
    return unzeroed if changed or unzeroed != text else None


def pythonic_calls(source: str, *, listed: bool) -> list[RawCall] | None:
    """Calls written as Python, `name(kw=literal, ...)` only, parsed with `ast` (never run).

    `listed`: the source must be one list `[f(a=1), g()]`; otherwise one call per statement (a
    single list statement is accepted too). Positional arguments or `**kw` reject the whole text.
    """
    src = source.strip()
    if not src or len(src) > 200_000:
        return None
    tree = _parse(src, listed)
    if tree is None:
        repaired = repair_python_literals(src)
        tree = None if repaired is None else _parse(repaired, listed)
    if tree is None:
        return None
    exprs: list[ast.expr]
    if isinstance(tree, ast.Expression):
        if not isinstance(tree.body, ast.List):
            return None
        exprs = list(tree.body.elts)
    else:
        assert isinstance(tree, ast.Module)
        exprs = []
        for stmt in tree.body:
            if not isinstance(stmt, ast.Expr):
                return None
            if isinstance(stmt.value, ast.List) and len(tree.body) == 1:
                exprs.extend(stmt.value.elts)
            else:
                exprs.append(stmt.value)
    if not exprs:
        return None
    calls: list[RawCall] = []
    for expr in exprs:
        if not isinstance(expr, ast.Call) or expr.args:
            return None
        name = _dotted(expr.func)
        if name is None or not valid_name(name):
            return None
        values: dict[str, Any] = {}
        problem = None
        for kw in expr.keywords:
            if kw.arg is None:
                return None
            try:
                values[kw.arg] = literal_value(kw.value)
            except ValueError:
                problem = f"argument {kw.arg!r} of {name} is not a literal"
        calls.append(RawCall("values", name, values=values, problem=problem))
    return calls
