"""A class graded by `python -m grader batch --gpus all` on a GPU box, then each of its
submissions graded alone: the two gradebooks must agree (issue 20). Run on a CUDA machine:

    python -m tools.gpu_batch --out reports/gpu_batch [--exercises softmax_triton,flash_decode]
                              [--alone all|none|NAME,...] [--tolerance 0.05]
                              [--gpus all|N|none] [--layers NAMES] [--size N]
                              [--shard I/N | --only NAME,...]

(--gpus none --layers cpu,adversarial,interp: the same on a machine without a GPU, one
submission at a time.)

The class (<out>/class/<name>/), graded on --exercises (every layer):
  a_solutions   solutions/                                        full marks
  b_stubs       the stubs as released (tools.stubs)               0
  c_variants    solutions/ with each exercise's first correct variant (tests/exercises/*/variants)
                in place                                          full marks but for speed
                (a correct kernel may be slow: the perf layer is not judged here)
  d_wrong       ... its first wrong case (tests/exercises/*/wrong)       fewer points
  e_mutants     ... its first mutant (tests/exercises/*/mutants.py)     fewer points
  f_cheats      ... its first cheat graded on a GPU (expect.json "gpu")  fewer points
An exercise without a case of that kind keeps its solution. --size N (more than 6) adds
submissions round the kinds c to f, each taking the next case of its kind (c_variants_2: the
second correct variant of each exercise, ...), so a class of 20 has 4 or 5 of each. --shard
I/N grades (and compares) only batch's shard I of N, the submissions I, I+N, ... of the sorted
class: a class too long for one sitting (one device call, one Slurm task) goes in N of them.
--only NAME,... writes, batches and compares only those submissions of the class: those a
shard's earlier sitting left without a grade alone, say.
The batch measures the grader's baselines once (its measurements.json); a grade alone
measures its own, so perf credit may differ between the two by the baselines' noise:
--tolerance (points per exercise) bounds it.
Writes <out>/gradebook.csv (the batch's), <out>/alone/<name>.json, <out>/summary.md and
summary.json (both gradebooks side by side, the seconds, submissions per hour); exits 1 when a
row broke its expectation or the gradebooks differ by more than --tolerance.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.batch import find_submissions, shard_spec  # noqa: E402
from tests.cases import cases, cheats, exercise_of, folder_files, mutants  # noqa: E402
from tests.helpers import grade  # noqa: E402

EXERCISES = ("softmax_triton", "flash_decode")
FULL, SPEED, ZERO, FEWER = "full marks", "full marks but for speed", "0", "fewer points"


def case_files(kind: str, exercise: str, on_gpu: bool, index: int = 0) -> tuple[str, dict[str, str]]:
    """Case `index` of `kind` for `exercise` (counted round, so a kind with fewer cases repeats):
    its name and {file: text}, only that exercise's file (("", {}) when none): a correct variant
    (no expect.json), a cheat of the layers graded (on_gpu: marked "gpu")."""
    name = f"{exercise}.py"
    if kind == "mutants":
        found = [m for m in mutants() if m.exercise == exercise]
        if not found:
            return "", {}
        m = found[index % len(found)]
        return m.name, {name: m.apply((ROOT / "solutions" / name).read_text())}
    if kind == "cheats":
        folders = [c.folder for c in cheats() if c.exercise == exercise
                   and (c.gpu if on_gpu else c.cpu)]
    else:
        folders = [f for f in cases(kind) if exercise_of(f) == exercise
                   and not (kind == "variants" and (f / "expect.json").exists())]
    usable = [(f.name, folder_files(f)) for f in folders]
    usable = [(case, {name: files[name]}) for case, files in usable if name in files]
    return usable[index % len(usable)] if usable else ("", {})


KINDS = (("c_variants", SPEED, "variants"), ("d_wrong", FEWER, "wrong"),
         ("e_mutants", FEWER, "mutants"), ("f_cheats", FEWER, "cheats"))


def class_plan(size: int) -> dict[str, tuple[str, str | None, int]]:
    """{submission: (expectation, kind of case, case index)}: solutions, stubs, then the kinds
    in turn until `size` (at least 6)."""
    plan = {"a_solutions": (FULL, None, 0), "b_stubs": (ZERO, None, 0)}
    for i in range(max(size, 6) - 2):
        sub, expect, kind = KINDS[i % len(KINDS)]
        index = i // len(KINDS)
        plan[sub if index == 0 else f"{sub}_{index + 1}"] = (expect, kind, index)
    return plan


def make_class(root: Path, exercises: list[str], on_gpu: bool, size: int = 6,
               only: list[str] | None = None) -> dict[str, dict]:
    """Writes the class under root (only the submissions `only` names, if given);
    {submission: {"expect": ..., "cases": {exercise: case}}} (full marks where no exercise had
    a case of the kind)."""
    from tools.stubs import expected_stubs

    stubs = expected_stubs()
    made = {}
    for sub, (expect, kind, index) in class_plan(size).items():
        if only is not None and sub not in only:
            continue
        folder = root / sub
        folder.mkdir(parents=True)
        base = stubs if sub == "b_stubs" else {f.name: f.read_text()
                                               for f in (ROOT / "solutions").glob("*.py")}
        replaced = {}
        for ex in exercises if kind else ():
            case, files = case_files(kind, ex, on_gpu, index)
            base.update(files)
            if files:
                replaced[ex] = case
        for name, text in base.items():
            (folder / name).write_text(text)
        made[sub] = {"expect": expect if replaced or not kind else FULL, "cases": replaced}
    return made


def in_shard(plan: dict, klass: Path, shard: tuple[int, int]) -> dict:
    """The submissions of `plan` that batch --shard I/N grades in the class folder `klass`
    (grader.batch.find_submissions picks them)."""
    graded = {p.name for p in find_submissions(klass, shard)}
    return {sub: want for sub, want in plan.items() if sub in graded}


def read_gradebook(path: Path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {row["submission"]: row for row in csv.DictReader(f)}


def grade_alone(sub: Path, out: Path, exercises: list[str],
                selection: list[str]) -> tuple[dict | None, float, str]:
    """(per-exercise scores, seconds, problem) of one grade of `sub` on its own."""
    start = time.perf_counter()
    try:
        report = grade(sub, *selection, json_path=out, timeout=1800)
    except (AssertionError, subprocess.SubprocessError) as e:
        return None, time.perf_counter() - start, str(e)[-400:]
    scores = {ex: round(sum(t["score"] for t in report["tests"] if t["exercise"] == ex), 3)
              for ex in exercises}
    return {**scores, "total": round(report["score"], 3), "max": round(report["max_score"], 3)}, \
        time.perf_counter() - start, ""


def judge(expect: str, row: dict, report: Path) -> str:
    """'' when the batch's row meets the submission's expectation, else why not (SPEED: every
    check but the perf layer's at full marks, read from the batch's report)."""
    if row.get("note"):
        return row["note"]
    total, top = float(row["total"]), float(row["max"])
    if expect == SPEED:
        lost = [t["name"] for t in json.loads(report.read_text())["tests"]
                if t["layer"] != "perf" and t["score"] < t["max_score"]]
        return f"expected {expect}, lost points on {', '.join(lost)}" if lost else ""
    ok = {FULL: total == top, ZERO: total == 0, FEWER: total < top}[expect]
    return "" if ok else f"expected {expect}, got {total:g}/{top:g}"


def write_summary(out: Path, exercises: list[str], spread: list[str], plan: dict,
                  batch_s: float, rows: list[dict]) -> None:
    """summary.json and summary.md from the rows so far (written when the batch ends, then again
    after every grade alone, so a run stopped early keeps what it measured)."""
    per_hour = 3600 * len(plan) / batch_s
    summary = {"exercises": exercises, "batch_s": round(batch_s, 1),
               "submissions": len(plan), "per_hour": round(per_hour, 1), "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    lines = [f"`batch {' '.join(spread)}` over {len(plan)} submissions on {', '.join(exercises)}: "
             f"{batch_s:.1f} s, {per_hour:.1f} submissions per hour", "",
             "| submission | cases | expected | batch | alone | largest difference | problem |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        alone = f"{r['alone']['total']:g}/{r['alone']['max']:g} ({r['alone_s']:.0f} s)" \
            if r["alone"] else "–"
        batch = r["batch"]["note"] or f"{r['batch']['total']}/{r['batch']['max']} ({r['batch_s']} s)"
        cases_ = ", ".join(f"{ex}: {k}" for ex, k in r["cases"].items()) or "–"
        diff = "–" if r["largest_difference"] is None else f"{r['largest_difference']:g}"
        lines.append(f"| {r['submission']} | {cases_} | {r['expect']} | {batch} | {alone} | "
                     f"{diff} | {r['problem'] or 'none'} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def names(text: str) -> list[str]:
    """A comma-separated option as its names ("a,b," -> ["a", "b"])."""
    return [n for n in text.split(",") if n]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="reports/gpu_batch")
    p.add_argument("--exercises", default=",".join(EXERCISES))
    p.add_argument("--alone", default="all", help="all, none, or submission names")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--gpus", default="all", help="batch's --gpus, or none (--jobs 1)")
    p.add_argument("--layers", default="", help="the layers graded (default: every one)")
    p.add_argument("--size", type=int, default=6, help="submissions in the class (6 or more)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--shard", type=shard_spec, default=None,
                       help="batch's --shard I/N: only those submissions")
    which.add_argument("--only", default="", help="only these submissions of the class")
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    exercises = names(args.exercises)
    klass = out / "class"
    if klass.exists():
        sys.exit(f"{klass} exists: give another --out")
    layers = args.layers.split(",") if args.layers else ["gpu"]
    only = names(args.only) or None
    if only and (unknown := sorted(set(only) - set(class_plan(args.size)))):
        sys.exit(f"--only: no submission {', '.join(unknown)} in a class of {args.size}")
    plan = make_class(klass, exercises, on_gpu=bool({"gpu", "perf"} & set(layers)),
                      size=args.size, only=only)
    selection = ["--exercises", ",".join(exercises), *(["--layers", args.layers] if args.layers else [])]
    spread = ["--jobs", "1"] if args.gpus == "none" else ["--gpus", args.gpus]
    if args.shard:
        plan = in_shard(plan, klass, args.shard)
        spread += ["--shard", "/".join(map(str, args.shard))]

    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(klass), "--out", str(out),
                           *spread, *selection],
                          cwd=ROOT, capture_output=True, text=True)
    batch_s = time.perf_counter() - start
    (out / "batch.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        return 1
    book = read_gradebook(out / "gradebook.csv")
    took = dict(re.findall(r"^(\S+): .*?\((\d+) s", proc.stdout, re.M))   # batch's progress lines

    alone_names = list(plan) if args.alone == "all" else [] if args.alone == "none" \
        else names(args.alone)
    (out / "alone").mkdir(exist_ok=True)
    # the batch's rows first, each judged against its expectation, written before any grade
    # alone: a run stopped during those keeps the batch's summary
    rows = []
    for sub, want in plan.items():
        row = book.get(sub, {"note": "no row in the gradebook"})
        rows.append({"submission": sub, "cases": want["cases"], "expect": want["expect"],
                     "batch": {k: row.get(k) for k in (*exercises, "total", "max", "note")},
                     "batch_s": int(took.get(sub, 0)), "alone": None, "alone_s": 0.0,
                     "largest_difference": None,
                     "problem": judge(want["expect"], row, out / "reports" / f"{sub}.json")})
    write_summary(out, exercises, spread, plan, batch_s, rows)
    for r in rows:
        if r["submission"] not in alone_names:
            continue
        sub = r["submission"]
        alone, seconds, why = grade_alone(klass / sub, out / "alone" / f"{sub}.json", exercises,
                                          selection)
        r["alone"], r["alone_s"] = alone, round(seconds, 1)
        if alone is not None and not r["batch"]["note"]:
            r["largest_difference"] = max(abs(float(r["batch"][ex]) - alone[ex])
                                          for ex in exercises)
            if r["largest_difference"] > args.tolerance:
                r["problem"] = r["problem"] or (f"batch and alone differ by "
                                                f"{r['largest_difference']:g} points")
        r["problem"] = r["problem"] or why
        write_summary(out, exercises, spread, plan, batch_s, rows)
    failed = sum(bool(r["problem"]) for r in rows)
    print((out / "summary.md").read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
