"""The import rules of the tree, read from the source (ast) of grader/, tools/ and hidden_tests/:

- the layers, lowest first: wire, worker, sandbox, judge, then exercises and report; a module
  imports only from its own layer or below;
- grader/worker/ runs beside student code: of the grader it imports only grader.worker and
  grader.wire; grader/wire/ imports only grader.wire (the boundary is the tree);
- nothing imports a check module (grader/exercises/<ex>/test_*.py, hidden_tests/<ex>/test_*.py):
  only the test runner does;
- no module imports another module's `_private` name (`from m import _x`, `m._x`);
- grader's modules import each other without a cycle;
- shared grader modules (grader/ outside grader/exercises/) import no exercise's module by name:
  they go through grader.registry.exercise_module;
- an exercise folder holds only the modules of docs/ARCHITECTURE.md's table of roles.

Every import statement counts, at module level or inside a function (a function-level import is
a dependency all the same, only a later one), and `if TYPE_CHECKING:` blocks too; an
importlib.import_module call with a constant name counts as an import of that name. An import
of a.b.c is an edge to a.b.c only, not to the packages above it that Python runs first (else a
package __init__ that gathers its own submodules would be a cycle with each of them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.helpers import ROOT

SCANNED = ("grader", "tools", "hidden_tests")
REPO_PACKAGES = ("grader", "tools", "hidden_tests", "tests", "solutions", "exercises")


@dataclass(frozen=True)
class Import:
    source: str      # the importing module, dotted
    target: str      # the module imported (a submodule when `from package import submodule`)
    names: tuple     # the names taken from it by `from target import ...`
    line: int

    def where(self) -> str:
        return f"{module_path(self.source)}:{self.line}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def module_path(name: str) -> str:
    """The file of a module of the repository, relative ('' if it is not one)."""
    base = ROOT.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p.relative_to(ROOT).as_posix()
    return ""


def is_package(name: str) -> bool:
    return module_path(name).endswith("__init__.py")


def modules() -> dict[str, Path]:
    """Every module of the scanned folders, {dotted name: path}."""
    return {module_name(p): p for top in SCANNED for p in sorted((ROOT / top).rglob("*.py"))
            if "__pycache__" not in p.parts}


def absolute(source: str, module: str | None, level: int) -> str:
    """The module a (possibly relative) `from` import names."""
    if not level:
        return module or ""
    package = source if is_package(source) else source.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{module}" if module else package


@cache
def imports_of(source: str) -> tuple[Import, ...]:
    tree = ast.parse(Path(ROOT / module_path(source)).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(source, a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(source, node.module, node.level)
            names = [a.name for a in node.names]
            subs = [n for n in names if module_path(f"{base}.{n}")]
            found += [Import(source, f"{base}.{n}", (), node.lineno) for n in subs]
            if len(subs) < len(names):
                found.append(Import(source, base, tuple(n for n in names if n not in subs),
                                    node.lineno))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append(Import(source, node.args[0].value, (), node.lineno))
    return tuple(found)


def all_imports() -> list[Import]:
    return [i for m in modules() for i in imports_of(m)]


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def in_package(target: str, package: str) -> bool:
    return target == package or target.startswith(package + ".")


def assert_none(found: list[tuple[str, str, int]], rule: str) -> None:
    """No violation of `rule` (path, what, line)."""
    new = sorted(f"{path}:{line}: {what}" for path, what, line in found)
    assert new == [], f"{rule}:\n" + "\n".join(new)


def test_worker_and_wire_import_only_what_they_may():
    allowed = {"grader.worker": ("grader.worker", "grader.wire"), "grader.wire": ("grader.wire",)}
    bad = [f"{i.where()}: imports {i.target}" for i in all_imports()
           for side, may in allowed.items()
           if in_package(i.source, side) and in_package(i.target, "grader")
           and not any(in_package(i.target, m) for m in may)]
    assert bad == [], "what runs beside student code imports the trusted grader:\n" + "\n".join(bad)


def check_module(name: str) -> bool:
    return ((in_package(name, "grader") or in_package(name, "hidden_tests"))
            and name.rpartition(".")[2].startswith("test_"))


def check_module_imports() -> list[tuple[str, str, int]]:
    return [(module_path(i.source), f"imports {i.target}", i.line) for i in all_imports()
            if check_module(i.target)]


def private_uses() -> list[tuple[str, str, int]]:
    found = []
    for source in modules():
        path = module_path(source)
        for i in imports_of(source):
            if i.target == source or i.target.split(".")[0] not in REPO_PACKAGES:
                continue   # a library's private API is a risk of its own, not a seam of ours
            found += [(path, f"from {i.target} import {n}", i.line) for n in i.names if private(n)]
            if any(private(part) for part in i.target.split(".")):
                found.append((path, f"imports {i.target}", i.line))
        found += [(path, f"{alias}.{attr}", line) for alias, attr, line in private_attributes(source)]
    return found


def test_nothing_imports_a_check_module():
    assert_none(check_module_imports(), "only the test runner imports a check module "
                        "(test_*.py); move what is shared into a public module of the exercise folder")


def test_no_module_imports_another_modules_private_names():
    assert_none(private_uses(), "a module uses another module's _private name")


def private_attributes(source: str) -> list[tuple[str, str, int]]:
    """`alias._name` where alias is a module of the repository bound by an import in `source`."""
    tree = ast.parse(Path(ROOT / module_path(source)).read_text())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                if top in REPO_PACKAGES:   # `import a.b as m` binds a.b; `import a.b` binds a
                    aliases[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom):
            base = absolute(source, node.module, node.level)
            for a in node.names:
                if module_path(f"{base}.{a.name}"):
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases
                and aliases[node.value.id] != source):
            found.append((node.value.id, node.attr, node.lineno))
    return found


def grader_graph() -> dict[str, set[str]]:
    """grader's modules and the grader modules each one imports (any import, any level)."""
    names = {m for m in modules() if in_package(m, "grader")}
    return {m: {i.target for i in imports_of(m) if i.target in names and i.target != m}
            for m in names}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_the_grader():
    graph = grader_graph()
    found = cycles(graph)
    detail = [" <-> ".join(c) + "\n  " + "\n  ".join(
        f"{i.where()}: {i.source} imports {i.target}" for m in c for i in imports_of(m)
        if i.target in c and i.target != m) for c in found]
    assert found == [], "import cycles among grader's modules:\n" + "\n".join(detail)


def test_shared_grader_modules_import_no_exercise_by_name():
    exercises = sorted(p.parent.name for p in (ROOT / "grader" / "exercises").glob("*/rows.py"))
    assert exercises, "no exercise folder found"
    bad = [f"{i.where()}: imports {i.target}" for i in all_imports()
           if in_package(i.source, "grader") and not in_package(i.source, "grader.exercises")
           and any(in_package(i.target, f"grader.exercises.{ex}") for ex in exercises)]
    assert bad == [], ("shared code names no exercise: use "
                       "grader.registry.exercise_module(exercise, name):\n" + "\n".join(bad))


def test_the_rules_see_the_tree():
    """The scan finds the modules and imports it is about (a rule over nothing proves nothing)."""
    graph = grader_graph()
    assert "grader.worker.worker" in graph and "grader.registry" in graph
    assert any(in_package(t, "grader.wire") for t in graph["grader.worker.worker"])
    assert any(i.target.startswith("grader.exercises.") for i in all_imports()
               if in_package(i.source, "hidden_tests")), "hidden_tests import no exercise module"


# the layers of the grader, lowest first: a module imports only from its own layer or below
LAYERS = ("grader.wire", "grader.worker", "grader.sandbox", "grader.judge",
          ("grader.exercises", "grader.report"))


def layer_of(name: str) -> int | None:
    for rank, packages in enumerate(LAYERS):
        if any(in_package(name, p) for p in ((packages,) if isinstance(packages, str) else packages)):
            return rank
    return None


def test_packages_import_only_downward():
    """report and exercises above judge, judge above sandbox, sandbox above worker, worker above
    wire: what starts student code never reaches back into what judges it."""
    bad = [(module_path(i.source), f"imports {i.target}", i.line) for i in all_imports()
           if layer_of(i.source) is not None and layer_of(i.target) is not None
           and layer_of(i.target) > layer_of(i.source)]
    assert_none(bad, "an import upward across the grader's layers")


# ------------------------------------------------------------------ an exercise folder's roles


def folder_roles() -> list[str]:
    """The module names docs/ARCHITECTURE.md's table "An exercise is a folder" allows, as
    patterns: `test_<layer>.py` for each layer of the registry, `bench_<row>.py` for any row."""
    from grader.registry import LAYERS

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## An exercise is a folder", 1)[1].split("\n## ", 1)[0]
    names = []
    for line in section.splitlines():
        if line.startswith("| `"):
            for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
                name = name.removeprefix("grader/exercises/<ex>/")
                if name.endswith(".py") and "/" not in name:
                    names.append(name)
    layers = "|".join(LAYERS)
    return [re.escape(n).replace(re.escape("<layer>"), f"({layers})")
            .replace(re.escape("<row>"), "[a-z0-9_]+") for n in names]


def test_every_exercise_module_has_a_role_in_the_table():
    """An exercise folder holds only the modules of the table's fixed roles (rows, reference,
    judging, mistakes, kernel hooks, bench rows, a check module per layer), so a reader knows
    where each exercise keeps what; a new kind of module is a new row of the table first."""
    roles = folder_roles()
    assert {"rows\\.py", "mistakes\\.py", "kernel\\.py"} <= set(roles), roles
    folders = sorted(p.parent for p in (ROOT / "grader" / "exercises").glob("*/rows.py"))
    bad = [p.relative_to(ROOT).as_posix() for folder in folders for p in sorted(folder.glob("*.py"))
           if not any(re.fullmatch(r, p.name) for r in roles)]
    assert folders and bad == [], ("modules with no role in docs/ARCHITECTURE.md's table (An "
                                   "exercise is a folder):\n" + "\n".join(bad))
