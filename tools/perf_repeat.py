"""Perf credit that holds still (issue 20): one submission's perf layer graded REPEATS times in a
row, each grade with fresh seeds; prints every perf check's score in each run, the largest
difference between runs, and how often a check's readings left its credit open ("Not decided in
this run", grader.judge.perf.verdicts.Tally). Run on a CUDA machine, with nothing else on the GPU:

    python3 tools/perf_repeat.py [--repeats 5] [--variant flash_decode/decode_fp16_elementwise_qk]
                                 [--exercises NAMES] [--layers perf] [--out DIR] [--tolerance 0.05]

Without --variant: solutions/. With it: solutions/ with that case's files in place
(tests/exercises/<exercise>/variants/<case>), graded on its exercise unless --exercises says
otherwise: a slow variant shows whether a credit on a band's slope moves between grades. One
grade at a time: the perf layer times, so no other grade may share the GPU. Each report is
kept as DIR/run-<i>.json. Exit 1 when a check's score moved by more than --tolerance of its
points between two runs, or a grade failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cases import folder_files  # noqa: E402
from tests.helpers import copy_solutions, grade  # noqa: E402


def submission(variant: str | None) -> tuple[Path, str]:
    """A fresh copy of solutions/, with the variant's files in place; its exercise ("" without)."""
    files, exercise = {}, ""
    if variant:
        exercise, case = variant.split("/", 1)
        folder = ROOT / "tests" / "exercises" / exercise / "variants" / case
        if not folder.is_dir():
            raise SystemExit(f"perf_repeat: no variant {variant} (looked in {folder})")
        files = folder_files(folder)
    return copy_solutions(Path(tempfile.mkdtemp(prefix="perf-repeat-")) / "sub", files), exercise


def table(reports: list[dict], tolerance: float) -> tuple[list[str], bool]:
    """The lines to print (a Markdown table: a row per check) and whether every check held
    within `tolerance` of its points."""
    names = [t["name"] for t in reports[0]["tests"] if t["status"] != "not_run"]
    runs = [{t["name"]: t for t in r["tests"]} for r in reports]
    lines = ["| check | " + " | ".join(f"run {i}" for i in range(1, len(reports) + 1))
             + " | largest difference | not decided |",
             "|---|" + "---|" * (len(reports) + 2)]
    steady = True
    for name in names:
        got = [run.get(name, {}) for run in runs]
        scores = [float(t.get("score", 0.0)) for t in got]
        top = max(float(t.get("max_score", 0.0)) for t in got)
        moved = max(scores) - min(scores)
        steady &= moved <= tolerance * top
        undecided = sum(bool(t.get("undecided")) for t in got)
        lines.append(f"| {name} | " + " | ".join(f"{s:.3f}" for s in scores)
                     + f" | {moved:.3f} of {top:g} | {undecided} of {len(got)} |")
    return lines, steady


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variant", help="EXERCISE/CASE of tests/exercises/*/variants")
    ap.add_argument("--exercises", help="comma-separated (default: all, or the variant's)")
    ap.add_argument("--layers", default="perf")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "perf_repeat")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="of a check's points: the most its score may move between runs")
    args = ap.parse_args(argv)
    sub, exercise = submission(args.variant)
    exercises = args.exercises or exercise
    args.out.mkdir(parents=True, exist_ok=True)
    reports, failed, start = [], [], time.time()
    flags = ["--layers", args.layers, *(["--exercises", exercises] if exercises else [])]
    steady = True
    for i in range(1, args.repeats + 1):
        try:
            r = grade(sub, *flags, json_path=args.out / f"run-{i}.json", timeout=1800)
        except (AssertionError, OSError, ValueError) as e:   # the grader's exit, not a report
            failed.append(f"run {i}: {str(e).strip()[:300]}")
            break
        reports.append(r)
        failed += [f"run {i}: {r['grading_failed']}"] if r.get("grading_failed") else []
        print(f"run {i}: {r['score']:g}/{r['max_score']:g} in {r['elapsed_s']:.1f} s "
              f"({time.time() - start:.0f} s so far)", flush=True)
        # rewritten after every grade: a run stopped early keeps what it measured
        steady = summarize(args, reports, failed, time.time() - start)
    if not reports:
        print(f"perf_repeat: no grade: {failed[0]}", file=sys.stderr)
        return 1
    print((args.out / "summary.md").read_text())
    return 0 if steady and not failed else 1


def summarize(args, reports: list[dict], failed: list[str], seconds: float) -> bool:
    """DIR/summary.md from the grades so far; whether every check held still."""
    lines, steady = table(reports, args.tolerance)
    what = args.variant or "solutions"
    verdict = ("held still" if steady else f"MOVED by more than {args.tolerance:g} of a check's "
               f"points") + (f"; a grade failed: {failed[0]}" if failed else "")
    text = "\n".join([f"# {what}: {args.layers} layer graded {len(reports)} of {args.repeats} times",
                      "", *lines, "", f"{what}: {verdict} ({len(reports)} grades in {seconds:.0f} s)"])
    (args.out / "summary.md").write_text(text + "\n")
    return steady


if __name__ == "__main__":
    sys.exit(main())
