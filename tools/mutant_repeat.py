"""Mistakes that lose the same points every grade (issue 20): every known mistake (the mutants of
tests/exercises/*/mutants.py) graded REPEATS times on the CPU layers with the hidden checks, each
grade with fresh seeds; prints every check whose score moved between the grades. A check that
shows a mistake in some draws and not in others makes a batch and a grade alone disagree
(docs/gpu/session-12-06g). Runs on any machine, about a minute a round on two cores:

    python3 tools/mutant_repeat.py [--repeats 3] [--exercises NAMES]

Mutants of different exercises share a grade (one per exercise a round, as tests.packs packs
them), without the provenance replay. Exit 1 when a check moved. tests/test_steady_grades.py
keeps the cases found so far from coming back.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cases import mutants  # noqa: E402
from tests.corpus import SOLUTIONS  # noqa: E402
from tests.helpers import copy_solutions, grade  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exercises", help="comma-separated (default: every exercise with mutants)")
    args = ap.parse_args(argv)
    wanted = set(args.exercises.split(",")) if args.exercises else None
    by_exercise = collections.defaultdict(list)
    for m in mutants():
        if wanted is None or m.exercise in wanted:
            by_exercise[m.exercise].append(m)
    rounds = max((len(v) for v in by_exercise.values()), default=0)
    moved = 0
    for r in range(rounds):
        pick = {e: v[r] for e, v in by_exercise.items() if r < len(v)}
        files = {f"{e}.py": m.apply((SOLUTIONS / f"{e}.py").read_text()) for e, m in pick.items()}
        sub = copy_solutions(Path(tempfile.mkdtemp(prefix="mutant-repeat-")) / "sub", files)
        scores, start = collections.defaultdict(list), time.time()
        for _ in range(args.repeats):
            report = grade(sub, "--exercises", ",".join(pick), "--layers",
                           "cpu,adversarial,interp", replay=False)
            for t in report["tests"]:
                if t["status"] != "not_run":
                    scores[t["name"]].append((t["score"], t["message"][:200]))
        for name, got in sorted(scores.items()):
            if max(s for s, _ in got) - min(s for s, _ in got) > 1e-9:
                moved += 1
                mutant = pick[name.split(".")[0]].name
                print(f"moved: {mutant} {name} {[s for s, _ in got]}")
                for s, message in got:
                    print(f"    {s:g}: {message or '(passed)'}")
        print(f"round {r + 1}/{rounds}: {', '.join(sorted(m.name for m in pick.values()))} "
              f"({time.time() - start:.0f} s)", flush=True)
    print(f"{moved} check(s) moved in {args.repeats} grades of each mistake")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
