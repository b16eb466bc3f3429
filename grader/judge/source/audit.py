"""Static audit of a submission's source, run in the grader's process before any of it runs.

Under Triton's interpreter a kernel launch is only Python, so nothing the worker records can
prove that the student's kernel computed an answer: a thread, a subprocess or NumPy on the
tensor's memory can compute it beside a copy kernel, and code in the worker can patch the
worker's own probes. This audit refuses the constructs those need, with the file and line:

  - threads, subprocesses, multiprocessing, ctypes and foreign code, os.fork/exec/system/...;
  - dynamic code: exec, eval, compile, __import__, importlib, runpy, pickle/marshal;
  - file and /proc access: reading with open() (writing a result file is allowed: the lesson
    writes attn_bench.json), pathlib, io, mmap, os file calls;
  - imports of the grader (grader, hidden_tests, tests) and of the interpreter's internals;
  - frame and interpreter inspection: sys._getframe, sys.modules, inspect, gc, builtins,
    f_back/f_locals/tb_frame/__globals__/__subclasses__..., private torch internals (torch._C
    can switch off the dispatcher's recording);
  - in the Triton exercises only: taking a tensor's values out to NumPy or Python
    (.numpy(), .tolist(), data_ptr, storages, DLPack, NumPy itself), and getattr with a name
    computed at run time.

What the lesson needs stays allowed: torch, triton, numpy and scipy (NumPy exercises), math,
time, json, statistics, os.environ, sys.exit/argv/path. It audits the exercise's file and the files of the
submission it imports, as Python will read them: the bytes of the copy the workers import
(`Workers.sources`), decoded as UTF-8 (any other source encoding is refused).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader.judge.source.audit_mixed import mixed_findings, root_name
from grader.judge.source.audit_rules import (BANNED_ATTRS, BANNED_CALLS, BANNED_MODULES, NUMPY_FOR_TRITON,
                                       OS_ALLOWED, READ_MODES, SYS_ALLOWED, TENSOR_ESCAPES)
from grader.registry import EXERCISES

# from the exercises' registry rows (Exercise.audit)
TRITON_EXERCISES = frozenset(n for n, e in EXERCISES.items() if e.audit == "triton")
# Mixed exercises: a NumPy part and a Triton part in one file (grader.judge.source.audit_mixed)
MIXED_EXERCISES = {n: tuple(e.kernels) for n, e in EXERCISES.items() if e.audit == "mixed"}



@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def audit(directory: Path, exercise: str) -> list[Finding]:
    """Findings for `<directory>/<exercise>.py` and the submission files it imports."""
    directory = Path(directory)
    findings: list[Finding] = []
    todo, seen = [f"{exercise}.py"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = directory / name
        if not path.is_file():
            continue
        tree, problem = _parse(path)
        if problem:
            findings.append(problem)
            continue
        visitor = _Visitor(name, exercise in TRITON_EXERCISES)
        visitor.visit(tree)
        findings += visitor.findings
        if exercise in MIXED_EXERCISES:
            findings += [Finding(name, line, what) for line, what in
                         mixed_findings(tree, visitor.modules, MIXED_EXERCISES[exercise])]
        # submission files it imports are audited too (they run in the same worker)
        for module in visitor.imported:
            local = module.split(".")[0] + ".py"
            if (directory / local).is_file():
                todo.append(local)
    return sorted(set(findings), key=lambda f: (f.file != f"{exercise}.py", f.file, f.line))


def audit_file(path: Path, triton: bool) -> list[Finding]:
    """Findings for one file alone, under the rules of a Triton exercise or not."""
    tree, problem = _parse(Path(path))
    if problem:
        return [problem]
    visitor = _Visitor(Path(path).name, triton)
    visitor.visit(tree)
    return visitor.findings


def message(findings: list[Finding], exercise: str, folder: str = "") -> str:
    """One line per finding, as a compiler names a place (`folder/file.py:line: ...`), then
    what the audit allows. `folder`: how the report names the submission folder."""
    prefix = f"{folder.rstrip('/')}/" if folder else ""
    lines = [f"{prefix}{f}: refused by the grader's audit" for f in findings[:4]]
    if len(findings) > 4:
        lines.append(f"(and {len(findings) - 4} more)")
    return "\n".join(lines) + (
        f"\nSo {exercise}.py was not run. A submission may use torch, triton, numpy and scipy "
        f"(NumPy exercises) and the standard library; every answer must be computed by your own "
        f"code in the call (a kernel in the Triton exercises), with no threads, processes, file "
        f"reads, dynamic code or access to the grader.")


# -------------------------------------------------------------------------------- parsing

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _parse(path: Path) -> tuple[ast.AST | None, Finding | None]:
    data = path.read_bytes()
    name = path.name
    # PEP 263: a coding declaration on line 1 or 2 decides how Python reads the bytes
    for i, line in enumerate(data.splitlines()[:2]):
        m = _CODING.match(line)
        if m:
            enc = m.group(1).decode("ascii", "replace").lower().replace("_", "-")
            if enc not in ("utf-8", "utf8", "utf-8-sig"):
                return None, Finding(name, i + 1, f"source encoding {enc!r} (only UTF-8 is accepted)")
            break
        if not line.strip().startswith(b"#") and line.strip():
            break
    try:
        text = data.decode("utf-8-sig") if data.startswith(b"\xef\xbb\xbf") else data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, Finding(name, data[:e.start].count(b"\n") + 1, "bytes that are not UTF-8")
    if "\x00" in text:
        return None, Finding(name, text[:text.index("\x00")].count("\n") + 1, "a NUL byte")
    try:
        return ast.parse(data, filename=name), None
    except SyntaxError:
        # not the audit's business: the worker reports the SyntaxError with its traceback
        return ast.parse(""), None
    except (ValueError, RecursionError, MemoryError) as e:
        return None, Finding(name, 1, f"source the grader cannot parse ({type(e).__name__})")


# -------------------------------------------------------------------------------- the rules


class _Visitor(ast.NodeVisitor):
    def __init__(self, file: str, triton: bool):
        self.file = file
        self.triton = triton
        self.findings: list[Finding] = []
        self.imported: list[str] = []
        self.modules: dict[str, str] = {}   # local name -> module it is bound to

    def flag(self, node, what: str) -> None:
        self.findings.append(Finding(self.file, getattr(node, "lineno", 1), what))

    def _banned_module(self, dotted: str) -> str | None:
        table = {**BANNED_MODULES, **(NUMPY_FOR_TRITON if self.triton else {})}
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            why = table.get(".".join(parts[:i]))
            if why:
                return why
        if any(p.startswith("_") and not p.startswith("__") for p in parts[1:]) and \
                parts[0] in ("torch", "triton", "numpy"):
            return "private internals"
        return None

    # imports
    def visit_Import(self, node):
        for alias in node.names:
            self.imported.append(alias.name)
            why = self._banned_module(alias.name)
            if why:
                self.flag(node, f"import {alias.name} ({why})")
            self.modules[alias.asname or alias.name.split(".")[0]] = \
                alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level:   # relative imports: a submission is a folder of modules, not a package
            self.flag(node, "a relative import")
            return
        module = node.module or ""
        self.imported.append(module)
        why = self._banned_module(module)
        if why:
            self.flag(node, f"from {module} import ... ({why})")
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                if module in ("os", "sys"):
                    self.flag(node, f"from {module} import *")
                continue
            sub = self._banned_module(full)
            if not why and sub:
                self.flag(node, f"from {module} import {alias.name} ({sub})")
            elif module == "os" and alias.name not in OS_ALLOWED:
                self.flag(node, f"from os import {alias.name} (only os.environ, os.getenv and "
                                f"os.path are allowed)")
            elif module == "sys" and alias.name not in SYS_ALLOWED:
                self.flag(node, f"from sys import {alias.name} (interpreter internals)")
            elif alias.name in BANNED_CALLS or alias.name in BANNED_ATTRS or \
                    (self.triton and alias.name in TENSOR_ESCAPES):
                self.flag(node, f"from {module} import {alias.name}")
            self.modules[alias.asname or alias.name] = full
        self.generic_visit(node)

    # names and attributes
    def visit_Name(self, node):
        if node.id in ("__builtins__", "__import__", "__loader__", "__spec__"):
            self.flag(node, f"{node.id} (the interpreter's internals)")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        attr = node.attr
        dotted = _dotted(node, self.modules)
        why = self._banned_module(dotted) if dotted else None
        if why and not (isinstance(node.value, ast.Attribute) and
                        self._banned_module(_dotted(node.value, self.modules) or "")):
            self.flag(node, f"{dotted} ({why})")
        if attr in BANNED_ATTRS:
            self.flag(node, f".{attr} (frame or interpreter inspection)")
        elif self.triton and attr in TENSOR_ESCAPES:
            self.flag(node, f".{attr} (takes a tensor's values out of torch: the kernel must "
                            f"compute the answer)")
        root = root_name(node)
        module = self.modules.get(root) if root else None
        if module and isinstance(node.value, ast.Name):
            top = module.split(".")[0]
            if module == "os" and attr not in OS_ALLOWED:
                self.flag(node, f"os.{attr} (only os.environ, os.getenv and os.path are allowed)")
            elif module == "sys" and attr not in SYS_ALLOWED:
                self.flag(node, f"sys.{attr} (interpreter internals)")
            elif module == "os.path" or (module == "os" and attr == "path"):
                pass
            elif top in ("torch", "triton", "numpy") and attr.startswith("_") and not attr.startswith("__"):
                self.flag(node, f"{root}.{attr} (private internals)")
        elif module and attr.startswith("_") and not attr.startswith("__") and \
                module.split(".")[0] in ("torch", "triton"):
            self.flag(node, f"...{attr} (private internals)")
        if module and module.split(".")[0] == "os" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "path" and attr not in ("join", "basename", "dirname",
                                                               "splitext", "split", "sep"):
            self.flag(node, f"os.path.{attr} (file access)")
        self.generic_visit(node)

    # calls
    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Name):
            if f.id == "vars" and node.args and not (isinstance(node.args[0], ast.Name)
                                                      and node.args[0].id in self.modules):
                pass   # vars(args) of an object: its attributes, nothing more
            elif f.id in BANNED_CALLS:
                self.flag(node, f"{f.id}() ({BANNED_CALLS[f.id]})")
            elif f.id == "open":
                self._check_open(node)
            elif f.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
                self._check_getattr(node, f.id)
        self.generic_visit(node)

    def _check_open(self, node):
        mode = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "mode"), None)
        if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)) or \
                READ_MODES.search(mode.value) or not mode.value:
            self.flag(node, "open() for reading (file access; only writing a result file is allowed)")

    def _check_getattr(self, node, fn):
        obj, name = node.args[0], node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            n = name.value
            if n in BANNED_ATTRS or (self.triton and n in TENSOR_ESCAPES) or \
                    (isinstance(obj, ast.Name) and self.modules.get(obj.id) in ("os", "sys")
                     and n not in (OS_ALLOWED | SYS_ALLOWED)):
                self.flag(node, f"{fn}(..., {n!r})")
            return
        if self.triton or (isinstance(obj, ast.Name) and obj.id in self.modules):
            self.flag(node, f"{fn}() with a name computed at run time")


def _dotted(node, modules: dict) -> str | None:
    """"torch.multiprocessing.Process" for an attribute chain rooted at an imported module."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in modules:
        return None
    return ".".join([modules[node.id], *reversed(parts)])
