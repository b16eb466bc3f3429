"""The submission's kernels and nothing else: the source the replay worker imports.

    text, info = kernel_source.filtered(source)    # info.kernels, info.atomics, info.refused

Provenance (grader.judge.evidence.provenance) replays a gated call's recorded launches in a worker that
holds only the submission's @triton.jit functions, so what the replay computes is what the kernels
compute. This module makes that file from the submission's, by its syntax tree, in the trusted
process (reading a file runs nothing). It keeps, at module level:

  - imports of the libraries a kernel file needs (IMPORTS: numpy, torch, triton, math, ...);
  - functions decorated with triton.jit, with every other decorator (autotune, heuristics)
    removed: the recorded launches carry the constexprs and options those chose. The jit
    decorator loses its arguments, the function its defaults (every launch binds every argument)
    and any annotation that is not a name (`tl.constexpr`, "constexpr");
  - constants whose value is a literal, or tl.constexpr(literal).

Everything else (host functions, classes, statements, `if __name__ == "__main__":`) is dropped.
A kept kernel body may name only its own parameters and locals, triton, other kept kernels and
constants, `math`, and a few builtins; it reaches no attribute that starts with "_" nor triton's
machinery (BODY_DENIED: runtime, compiler, core, ir ...), and assigns no attribute. A body that
names torch, NumPy or a module alias, or pokes behind the language, is recorded in `refused`
(under the interpreter it would run as Python and could tell the two apart; Triton's front end,
which the replay also runs, refuses what calls Python on every layer).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
from dataclasses import dataclass, field

# libraries a kernel file imports; an exercise module (another file of the submission) is not one
IMPORTS = frozenset({"__future__", "numpy", "torch", "triton", "math", "typing", "functools",
                     "dataclasses", "os", "sys", "time", "json", "statistics"})
# builtins a Triton kernel body may use (the front end knows these)
BODY_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "print",
                           "isinstance", "tuple", "zip", "enumerate", "abs", "list",
                           "AssertionError", "ValueError", "True", "False", "None"})
# parts of triton a kernel body may not reach: the machinery behind the language, through which a
# body could tell compilation from interpretation (ir types) or reach the replay worker itself
BODY_DENIED = frozenset({"runtime", "compiler", "knobs", "backends", "tools", "testing", "profiler",
                         "core", "semantic", "interpreter", "ir"})
# module names a kernel body may read: triton (under whatever alias the file imported it) and math
BODY_MODULES = frozenset({"triton", "math"})


@dataclass
class Filtered:
    kernels: set = field(default_factory=set)     # names of the kept @triton.jit functions
    atomics: bool = False                         # some kernel uses tl.atomic_*
    refused: dict = field(default_factory=dict)   # kernel -> why its body is not Triton
    constexprs: dict = field(default_factory=dict)  # kernel -> names of its constexpr parameters
    digest: str = ""                              # sha256 of the filtered text
    # line in the filtered text -> line in the submission's file, for every statement of a
    # kept kernel: what the replay worker records (a lane out of bounds) names the student's line
    lines: dict = field(default_factory=dict)


def filtered(source: str) -> tuple[str, Filtered]:
    """The filtered module's text and what it holds. A file that does not parse gives an
    empty module (the submission's own import failed already)."""
    info = Filtered()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return "", info
    aliases = _triton_aliases(tree)
    kept: list = []
    constants = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            node = _imports(node)
            if node is not None:
                kept.append(node)
        elif isinstance(node, ast.FunctionDef) and any(_is_jit(d, aliases) for d in node.decorator_list):
            kept.append(_kernel(node))
            info.kernels.add(node.name)
            info.constexprs[node.name] = {a.arg for a in (*node.args.args, *node.args.kwonlyargs)
                                          if a.annotation is not None and
                                          "constexpr" in ast.unparse(a.annotation)}
        elif _constant(node):
            kept.append(node)
            constants.add(node.targets[0].id if isinstance(node, ast.Assign) else node.target.id)
    modules = _module_names(kept)
    for node in kept:
        if isinstance(node, ast.FunctionDef):
            info.atomics |= "atomic_" in ast.unparse(node)
            bad = _foreign_names(node, info.kernels | constants | _allowed_modules(kept), modules)
            if bad:
                info.refused[node.name] = bad
    head = [n for n in kept if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    rest = [n for n in kept if n not in head]
    module = ast.Module(body=[*head, ast.Import([ast.alias("triton")]), *rest], type_ignores=[])
    original = {n.name: _statement_lines(n) for n in kept if isinstance(n, ast.FunctionDef)}
    text = ast.unparse(ast.fix_missing_locations(module)) + "\n"
    info.digest = hashlib.sha256(text.encode()).hexdigest()
    for node in ast.parse(text).body:   # the same statements, in the same order, unparsed
        if isinstance(node, ast.FunctionDef) and node.name in original:
            info.lines.update(zip(_statement_lines(node), original[node.name]))
    return text, info


def _statement_lines(fn: ast.FunctionDef) -> list[int]:
    """The first line of every statement of a function, the def's own first, in source order."""
    return [n.lineno for n in sorted((n for n in ast.walk(fn) if isinstance(n, ast.stmt)),
                                     key=lambda n: (n.lineno, n.col_offset))]


def _triton_aliases(tree) -> dict:
    """Local names bound by module-level imports → the top-level module each names."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = node.module.split(".")[0]
    return out


def _imports(node):
    if isinstance(node, ast.ImportFrom):
        if node.level or not node.module or node.module.split(".")[0] not in IMPORTS:
            return None
        return node
    names = [a for a in node.names if a.name.split(".")[0] in IMPORTS]
    return ast.Import(names) if names else None


def _is_jit(decorator, aliases: dict) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):   # `from triton import jit`
        return target.id == "jit" and aliases.get("jit") == "triton"
    if isinstance(target, ast.Attribute) and target.attr == "jit":
        root = target.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and aliases.get(root.id) == "triton"
    return False


def _kernel(node: ast.FunctionDef) -> ast.FunctionDef:
    """The kernel with `@triton.jit` alone, no defaults, only name-like annotations."""
    args = node.args
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if not _plain_annotation(a.annotation):
            a.annotation = None
    args.defaults = []
    args.kw_defaults = [None] * len(args.kwonlyargs)
    node.decorator_list = [ast.Attribute(ast.Name("triton", ast.Load()), "jit", ast.Load())]
    node.returns = None
    return node


def _plain_annotation(a) -> bool:
    if a is None or (isinstance(a, ast.Constant) and isinstance(a.value, str)):
        return True
    while isinstance(a, ast.Attribute):
        a = a.value
    return isinstance(a, ast.Name)


def _constant(node) -> bool:
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return False
        value = node.value
    elif isinstance(node, ast.AnnAssign):
        if not isinstance(node.target, ast.Name) or node.value is None:
            return False
        if not _plain_annotation(node.annotation):
            return False
        value = node.value
    else:
        return False
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords and \
            isinstance(value.func, ast.Attribute) and value.func.attr == "constexpr":
        value = value.args[0]
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _module_names(kept: list) -> set:
    """Names the kept imports bind to modules other than triton and math."""
    out = set()
    for node in kept:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] not in BODY_MODULES:
                    out.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module.split(".")[0] not in BODY_MODULES:
            out.update(a.asname or a.name for a in node.names)
    return out


def _allowed_modules(kept: list) -> set:
    """Names bound by imports of triton and math (tl, triton, libdevice, jit, ...)."""
    out = {"triton"}
    for node in kept:
        if isinstance(node, ast.Import):
            out.update(a.asname or a.name.split(".")[0] for a in node.names
                       if a.name.split(".")[0] in BODY_MODULES)
        elif isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in BODY_MODULES:
            out.update(a.asname or a.name for a in node.names)
    return out


def _foreign_names(fn: ast.FunctionDef, known: set, modules: set) -> str:
    """The first global name the body reads that a Triton kernel cannot use, or the first
    attribute behind the language it reaches, described."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr in BODY_DENIED):
            return f"line {node.lineno} reaches .{node.attr}, behind the Triton language"
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            # a Triton value has no attribute to set; under the interpreter this would patch
            # the language (tl.sum = ...) or a block's array for the rest of the process
            return f"line {node.lineno} assigns .{node.attr}, which a Triton kernel cannot"
    local = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
            if name in local or name in known or (name in BODY_BUILTINS and name not in modules):
                continue
            if name in modules:
                return f"line {node.lineno} uses {name}, a module a Triton kernel cannot call"
            if hasattr(builtins, name):
                return f"line {node.lineno} calls the Python builtin {name}()"
            return f"line {node.lineno} reads {name}, which is not a Triton name of the file"
    return ""
