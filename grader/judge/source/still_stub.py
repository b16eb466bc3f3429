"""Which graded functions of a submission are still the stub, read from the source.

The perf layer times a function only if it can run: a function whose first statement (after
its docstring) is `raise NotImplementedError(...)`, as every stub's host function begins
(tools/stubs.py), raises on every call, so its perf checks are reported "not implemented"
without a worker, a profiler or a baseline (grader.plugin). Only an undecorated `def` counts,
and only when it is the name's last binding at the top of the file: anything else is timed,
and a call that raises NotImplementedError then is reported the same way, one worker later.
Nothing is allowed or denied here; a function read as a stub earns no points it could earn.
"""

from __future__ import annotations

import ast
from pathlib import Path


def still_stubs(path: Path, names) -> list[str]:
    """The names in `names` whose definition in `path` always raises NotImplementedError first;
    [] when the file cannot be read or parsed (its checks say why)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    last = {}
    for node in tree.body:
        for name in _bound(node):
            last[name] = node
    return [n for n in names if isinstance(last.get(n), ast.FunctionDef) and _raises_first(last[n])]


def _bound(node) -> list[str]:
    """The top-level names a statement binds (a def, a class, an assignment, an import)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:   # a name bound inside a block (if, try, for, with) is bound by that block
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)] + [
            d.name for d in ast.walk(node) if isinstance(d, (ast.FunctionDef, ast.ClassDef))]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _raises_first(fn: ast.FunctionDef) -> bool:
    if fn.decorator_list:
        return False
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]   # the docstring
    if not body or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
