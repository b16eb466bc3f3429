"""The corpora of every exercise, found by folder: tests/exercises/<exercise>/ holds

    mutants.py          MUTANTS, a list of Mutant: known mistakes, as edits to solutions/<exercise>.py
    wrong/<case>/       wrong work and its expect.json (tests/test_wrong.py)
    variants/<case>/    correct or near-correct work in another style (tests/test_variants.py)
    cheats/<case>/      <exercise>.py, a cheat, and its expect.json (tests/test_cheats.py)

(tests/exercises/README.md says what each holds). Adding an exercise's folder adds its corpora to
the tests here and to the GPU tools (tools/gpu_mutants.py, gpu_cheats.py, gpu_triton.py): none of
them names an exercise or a case.
"""

from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import ROOT

CORPORA = ROOT / "tests" / "exercises"
KINDS = ("wrong", "variants", "cheats")


@dataclass(frozen=True)
class Mutant:
    """A known mistake from the lesson, as an edit of solutions/<exercise>.py.

    tests/test_mutants.py grades it on its whole exercise (the CPU layers, public checks only)
    and requires that every check in `checks` loses points and says `idea` in its own words (the
    message, or the hint the failure gave: never only the registry's fixed hint), and that the
    report leads with one of `checks`, every other failure of the exercise grouped under it.
    A mistake only a GPU shows (a race between programs: the interpreter runs them one after
    another) has checks=() and names its gpu-layer checks in `gpu`: full marks on the CPU layers,
    and on a GPU (tools/gpu_mutants.py) each check in `gpu` loses points and names `idea`.
    A mistake only an advice check sees (Check.advice: one pass, key tiles, causal skipping,
    whose evidence is a record the student's process could rewrite) names it in `advice`: each
    must show as advice naming `idea`, and with checks=() the mutant keeps full marks (its
    answers are right, and advice pays nothing)."""
    name: str
    exercise: str
    find: str              # text in solutions/<exercise>.py, exactly once
    replace: str
    checks: tuple          # registry ids that must lose points
    idea: str              # a word or phrase each of those failures must say in its own words
    also: tuple = ()       # further (find, replace) pairs, for a mistake that takes several edits
    gpu: tuple = ()        # gpu-layer check ids that must catch it on a GPU (checks=() if only there)
    advice: tuple = ()     # advice check ids that must show advice naming `idea` (no points)

    def apply(self, source: str) -> str:
        """The mistake made in `source`, a solution as marked (solutions/<exercise>.py) or as
        it runs: the edits apply to the code that runs (runnable)."""
        source = runnable(source)
        for find, replace in ((self.find, self.replace), *self.also):
            count = source.count(find)
            if count != 1:
                raise AssertionError(f"mutant {self.name}: expected the text once in "
                                     f"solutions/{self.exercise}.py, found it {count} times: {find!r}")
            source = source.replace(find, replace)
        return source


@dataclass(frozen=True)
class Cheat:
    """A cheat: cheats/<name>/<exercise>.py, with its expect.json holding the other fields."""
    name: str
    exercise: str
    folder: Path
    says: str = ""            # words some failing check of the exercise must say (why)
    audit: bool = False       # the static audit must flag it: a message names the file and line
    # which checks must score 0: "all" of its exercise, or the checks built to catch it, for a
    # cheat whose other answers are computed by its own code in the call that is graded
    # (hard-coded for the public lengths, cached for shapes a check never repeats): the hidden
    # checks, with other lengths and every shape twice with fresh values
    zero_on: str | tuple = "all"
    cpu: bool = True          # False: honest on the CPU, a cheat only on a GPU (not graded here)
    gpu: bool = False         # graded on the gpu and perf layers too, by tools/gpu_cheats.py
    # graded with the static audit switched off (tests.helpers.grader_without_audit): a cheat
    # that only the run-time defences (provenance's replay, the sandbox) may catch
    without_audit: bool = False
    # the checks its right answers may still earn, for a cheat that computes a right answer and
    # forges only evidence of how (a read log rewritten: issue 53): the forged evidence pays
    # nothing (it is advice), so it earns these and nothing else; every other check scores 0
    earns_only: tuple = ()


CHEAT_KEYS = {"says", "audit", "zero_on", "cpu", "gpu"}
CHEAT_OPTIONAL = {"without_audit", "earns_only"}


def exercise_dirs() -> list[Path]:
    """tests/exercises/<exercise>/ folders, by name."""
    return sorted(p for p in CORPORA.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def cases(kind: str) -> list[Path]:
    """Every case folder of one kind ("wrong", "variants", "cheats") of every exercise, by name.
    Case names are unique across exercises: they are the tests' ids."""
    assert kind in KINDS, kind
    found = sorted((case for d in exercise_dirs() if (d / kind).is_dir()
                    for case in (d / kind).iterdir()
                    if case.is_dir() and not case.name.startswith(("_", "."))),
                   key=lambda p: p.name)
    names = [p.name for p in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"tests/exercises/*/{kind}/: case names used twice: {twice}"
    return found


def exercise_of(case: Path) -> str:
    """The exercise whose folder holds the case (tests/exercises/<exercise>/<kind>/<case>)."""
    return case.parent.parent.name


def steady_variants() -> dict[str, Path]:
    """{exercise: variant folder} of the variants marked `steady` (one per exercise at most):
    the float16 variant of that exercise graded again and again on fresh draws."""
    found = {}
    for folder in cases("variants"):
        if (folder / "steady").exists():
            exercise = exercise_of(folder)
            assert exercise not in found, f"{exercise}: two steady variants"
            found[exercise] = folder
    return found


def case(kind: str, name: str) -> Path:
    """The folder of one named case, whichever exercise holds it."""
    (found,) = [p for p in cases(kind) if p.name == name]
    return found


def mutants() -> list[Mutant]:
    """The MUTANTS of every exercise's mutants.py, exercise by exercise."""
    out = []
    for d in exercise_dirs():
        if (d / "mutants.py").exists():
            listed = importlib.import_module(f"tests.exercises.{d.name}.mutants").MUTANTS
            stray = [m.name for m in listed if m.exercise != d.name]
            assert not stray, f"{d}/mutants.py: mutants of another exercise: {stray}"
            out += listed
    return out


def cheats() -> list[Cheat]:
    """Every cheat folder, read with its expect.json."""
    out = []
    for folder in cases("cheats"):
        expect = json.loads((folder / "expect.json").read_text())
        assert CHEAT_KEYS <= set(expect) <= CHEAT_KEYS | CHEAT_OPTIONAL, (
            f"{folder}/expect.json: keys {sorted(expect)}, want {CHEAT_KEYS} (and maybe "
            f"{CHEAT_OPTIONAL})")
        zero_on = expect["zero_on"] if expect["zero_on"] == "all" else tuple(expect["zero_on"])
        earns_only = tuple(expect.get("earns_only", ()))
        out.append(Cheat(folder.name, exercise_of(folder), folder,
                         **{**expect, "zero_on": zero_on, "earns_only": earns_only}))
    return out


@functools.lru_cache(maxsize=1)
def runnable(source: str) -> str:
    """A solution file as it runs: without its stub markers and STUB blocks (tools.stubs
    .solution_of), which edits never have to step around; a file without markers as it is."""
    from tools.stubs import MARKER, solution_of

    if not any(MARKER.match(line) for line in source.splitlines()):
        return source
    return solution_of(source)


def _stubs() -> dict[str, str]:
    from tools.stubs import expected_stubs

    return expected_stubs()


def folder_files(folder: Path) -> dict[str, str]:
    """The exercise files a corpus folder holds, as {name: text}.

    A folder holds `<exercise>.py` files as a student would submit them, or, for a file that
    differs from the solution (or the stub) in a few places, `<exercise>.edits.json`:
    {"base": "solutions" | "exercises", "edits": [[find, replace], ...]}, that file of the base
    folder with each `find` (present exactly once) replaced, as a Mutant does. The stubs are the
    ones tools.stubs makes from the solutions (exercises/ is built, and may not be yet: a GPU
    box running tools.gpu_cheats straight after a checkout)."""
    files = {f.name: f.read_text() for f in sorted(folder.glob("*.py"))}
    for spec_path in sorted(folder.glob("*.edits.json")):
        spec = json.loads(spec_path.read_text())
        name = spec_path.name.removesuffix(".edits.json") + ".py"
        text = (_stubs()[name] if spec["base"] == "exercises"
                else runnable((ROOT / spec["base"] / name).read_text()))
        for find, replace in spec["edits"]:
            count = text.count(find)
            if count != 1:
                raise AssertionError(f"{spec_path}: expected an edit's text once in {spec['base']}/"
                                     f"{name}, found it {count} times: {find[:80]!r}")
            text = text.replace(find, replace)
        files[name] = text
    return files
