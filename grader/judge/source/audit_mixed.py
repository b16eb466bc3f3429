"""The audit of a mixed file: a NumPy part and a Triton part in one exercise file
(Exercise.audit == "mixed"; grader.judge.source.audit runs it after the general rules).

NumPy is legitimately NumPy in the NumPy part, so the whole file is audited under the general
rules, and then the code the Triton function can reach (it, every module-level name it or
module-level code refers to, transitively) under the Triton rules: no NumPy, no tensor escapes,
no getattr with a computed name. Code it cannot reach (the NumPy functions) may not patch
anything the Triton part runs: no global/nonlocal, no assignment to or deletion of attributes or
items of a module or of a module-level name, no setattr/delattr. Code under
`if __name__ == "__main__":` never runs in the grader and is not a root.
"""

from __future__ import annotations

import ast

from grader.judge.source.audit_rules import NUMPY_FOR_TRITON, TENSOR_ESCAPES


def root_name(node) -> str | None:
    """The name an attribute chain starts from (`a` of `a.b.c`), None for anything else."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_main_guard(node) -> bool:
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name) and t.left.id == "__name__"
            and len(t.comparators) == 1 and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == "__main__")


def _loaded_names(nodes) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def mixed_findings(tree, modules: dict, roots: tuple) -> list[tuple[int, str]]:
    """(line, what) for each construct of a mixed file that breaks its rules (the module's
    docstring); `roots`: the Triton functions, `modules`: local name -> imported module."""
    defs: dict[str, list] = {}
    top_level = []   # module-level statements other than def/class bodies and the main guard
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(node.name, []).append(node)
            top_level += [*node.decorator_list, *getattr(node, "bases", [])]
        elif isinstance(node, (ast.Import, ast.ImportFrom)) or _is_main_guard(node):
            continue
        else:
            top_level.append(node)
    reach, todo = set(), [*roots, *_loaded_names(top_level)]
    while todo:
        name = todo.pop()
        if name in reach or name not in defs:
            continue
        reach.add(name)
        todo += _loaded_names(defs[name])
    numpy_names = {local for local, mod in modules.items() if mod.split(".")[0] in NUMPY_FOR_TRITON}
    module_level = set(defs) | {t.id for node in tree.body for t in ast.walk(node)
                                if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
                                and node in top_level}
    findings = []
    for node in top_level + [d for name in reach for d in defs[name]]:
        findings += _triton_path(node, numpy_names)
    for name, nodes in defs.items():
        if name not in reach:
            for node in nodes:
                findings += _patches(node, set(modules) | module_level)
    return findings


def _triton_path(node, numpy_names: set) -> list[tuple[int, str]]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in numpy_names:
            out.append((n.lineno, f"{n.id} (NumPy in code the Triton function "
                                                f"runs: the kernel must compute the answer)"))
        elif isinstance(n, ast.Attribute) and n.attr in TENSOR_ESCAPES:
            out.append((n.lineno, f".{n.attr} (takes a tensor's values out of torch "
                                               f"in code the Triton function runs)"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("getattr", "setattr", "delattr", "hasattr") and len(n.args) >= 2 \
                and not isinstance(n.args[1], ast.Constant):
            out.append((n.lineno, f"{n.func.id}() with a name computed at run time"))
    return out


def _patches(node, shared: set) -> list[tuple[int, str]]:
    """In the NumPy part: anything that changes state the Triton part could run."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            out.append((n.lineno, f"{type(n).__name__.lower()} in the NumPy part "
                                               f"(it may not change what the Triton part runs)"))
        targets = []
        if isinstance(n, (ast.Assign, ast.Delete)):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Attribute, ast.Subscript)) and root_name(sub) in shared:
                    out.append((n.lineno, f"assignment to {root_name(sub)}'s "
                                       f"attributes or items in the NumPy part (it may not change "
                                       f"what the Triton part runs)"))
                    break
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                n.func.id in ("setattr", "delattr"):
            out.append((n.lineno, f"{n.func.id}() in the NumPy part"))
    return out
