"""Grades that hold still (issue 20): every known case of tests/exercises graded REPEATS times on
the CPU layers with the hidden checks, each grade with fresh seeds; prints every check whose score
moved between the grades, and every grade in which a cheat earned a point. A check that shows a
mistake in some draws and not in others makes a batch and a grade alone disagree
(docs/MEASUREMENTS.md). Runs on any machine, about half a minute a grade on two cores:

    python3 tools/mutant_repeat.py [--repeats 3] [--exercises NAMES] [--kinds mutants,wrong,...]

The kinds (tests/cases.py): mutants (the default: the mistakes of each mutants.py), wrong,
variants (correct work must not move either) and cheats (those graded on the CPU; the ones marked
without_audit with the static audit off). Cases of different exercises share a grade, one per
exercise (tests.packs.pack, as many exercises as have cases left): a cheat's points may depend
on its neighbours (the CPU layers of a grade run in parallel: tiled_attention's peak_reset,
mended in 083c644). A case of several files is graded alone, and bench_attn never beside
flash_triton (its sweep imports it). Mutants are graded without the provenance replay, the other
kinds with it. Exit 1 when a check moved or a cheat earned. tests/test_steady_grades.py keeps
the cases found so far from coming back.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.registry import EXERCISES  # noqa: E402
from tests import cases, packs  # noqa: E402
from tests.corpus import SOLUTIONS  # noqa: E402
from tests.helpers import copy_solutions, grade  # noqa: E402

KINDS = ("mutants", "wrong", "variants", "cheats")
LAYERS = "cpu,adversarial,interp"


@dataclass(frozen=True)
class Case:
    name: str
    exercise: str
    files: dict            # {file name: text} put into a copy of solutions/
    audit: bool = True
    replay: bool = True
    zero_on: str | tuple = ()   # a cheat's checks that must score 0 ("all": every one)


def collect(kinds, wanted) -> list[Case]:
    """The cases of the given kinds, of the wanted exercises (None: all)."""
    found = []
    if "mutants" in kinds:
        found += [Case(m.name, m.exercise,
                       {f"{m.exercise}.py": m.apply((SOLUTIONS / f"{m.exercise}.py").read_text())},
                       replay=False) for m in cases.mutants()]
    for kind in ("wrong", "variants"):
        if kind in kinds:
            found += [Case(f.name, cases.exercise_of(f), cases.folder_files(f))
                      for f in cases.cases(kind)]
    if "cheats" in kinds:
        found += [Case(c.name, c.exercise, cases.folder_files(c.folder), audit=not c.without_audit,
                       zero_on=c.zero_on) for c in cases.cheats() if c.cpu]
    return [c for c in found if wanted is None or c.exercise in wanted]


def grades(found: list[Case]) -> list[list[Case]]:
    """The grades to run (tests.packs.pack): one case per exercise each, as many exercises as
    have cases left, among cases graded the same way (audit, replay), never beside an exercise
    it imports (tests.packs.APART); a case of several files alone."""
    return packs.pack(found, exercise=lambda c: c.exercise, key=lambda c: (c.audit, c.replay),
                      packable=lambda c: len(c.files) == 1, size=len(EXERCISES))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exercises", help="comma-separated (default: every exercise with cases)")
    ap.add_argument("--kinds", default="mutants", help=f"comma-separated, of {','.join(KINDS)}")
    args = ap.parse_args(argv)
    kinds = args.kinds.split(",")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        ap.error(f"unknown kinds {unknown}: choose from {','.join(KINDS)}")
    wanted = set(args.exercises.split(",")) if args.exercises else None
    plan = grades(collect(kinds, wanted))
    moved = earned = 0
    for r, pick in enumerate(plan):
        files = {name: text for c in pick for name, text in c.files.items()}
        sub = copy_solutions(Path(tempfile.mkdtemp(prefix="mutant-repeat-")) / "sub", files)
        exercises = sorted({c.exercise for c in pick})
        owner = {c.exercise: c for c in pick}
        scores, start = collections.defaultdict(list), time.time()
        for _ in range(args.repeats):
            report = grade(sub, "--exercises", ",".join(exercises), "--layers", LAYERS,
                           audit=pick[0].audit, replay=pick[0].replay)
            for t in report["tests"]:
                if t["status"] != "not_run":
                    scores[t["name"]].append((t["score"], t["message"][:200]))
        for name, got in sorted(scores.items()):
            case = owner.get(name.split(".")[0])
            if case is None:
                continue
            if max(s for s, _ in got) - min(s for s, _ in got) > 1e-9:
                moved += 1
                print(f"moved: {case.name} {name} {[s for s, _ in got]}")
                for s, message in got:
                    print(f"    {s:g}: {message or '(passed)'}")
            if case.zero_on and (case.zero_on == "all" or name in case.zero_on) \
                    and max(s for s, _ in got) > 0:
                earned += 1
                print(f"earned: cheat {case.name} {name} {[s for s, _ in got]}")
        print(f"grade {r + 1}/{len(plan)}: {', '.join(sorted(c.name for c in pick))} "
              f"({time.time() - start:.0f} s)", flush=True)
    print(f"{moved} check(s) moved in {args.repeats} grades of each case"
          + (f"; cheats earned on {earned} check(s)" if "cheats" in kinds else ""))
    return 1 if moved or earned else 0


if __name__ == "__main__":
    sys.exit(main())
