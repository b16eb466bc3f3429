"""The Triton mutants (tests/exercises/*/mutants.py) on the GPU layer, and the perf layer's cases
(run on a GPU).

    python -m tools.gpu_mutants --out reports/gpu_mutants.md
    python -m tools.gpu_mutants --perf --out reports/gpu/perf_cases.md

Mutants: each is applied to a copy of solutions/ and only its exercise's gpu checks run
(`--checks`); the table says which of them caught it. The sanitizer runs only for the mutants
that drop a mask (it is slow: a minute per run), which is where it matters.

--perf: softmax_triton and flash_triton graded on the gpu and perf layers, one at a time (the
perf layer times against PyTorch and wants the GPU to itself), for three submissions:
  solutions        full marks expected;
  stub_no_raise    the stubs with only the `raise NotImplementedError` deleted: the kernels
                   compute nothing (NaN), so every gpu and perf point must be 0;
  skip_timed       the solutions, wrapped to skip the work on any call whose caller's frame
                   looks like a timed request (opts beyond the correctness checks', a `runs`,
                   `repeat` or `seeds` local): the perf points must be 0.
Reports (JSON and Markdown per case) land next to --out; the table says expected vs got.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cases import Mutant, mutants
from tools import stubs

ROOT = Path(__file__).resolve().parent.parent
def layer_checks(exercise: str, layers: tuple, sanitizer: bool = False) -> list[str]:
    """The exercise's checks of these layers, from the registry (a new exercise needs no entry
    here); the sanitizer only when asked (it is slow: a minute a run)."""
    from grader.registry import all_checks

    return [c.id for c in all_checks(include_hidden=False).values() if c.exercise == exercise and c.layer in layers
            and (sanitizer or not c.id.endswith(".sanitizer"))]


def grade_mutant(m: Mutant, work: Path, layers: tuple = ("gpu",), more: tuple = ()) -> dict:
    """Grade one mutant on `layers`; `more`: more grader flags (--sanitizer-log FILE)."""
    sub = work / f"{m.exercise}-{m.name}"
    sub.mkdir(parents=True)
    for f in (ROOT / "solutions").glob("*.py"):
        (sub / f.name).write_text(f.read_text())
    (sub / f"{m.exercise}.py").write_text(m.apply((ROOT / "solutions" / f"{m.exercise}.py").read_text()))
    checks = layer_checks(m.exercise, layers, sanitizer="mask" in m.name)
    out = work / f"{m.exercise}-{m.name}.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "--submission", str(sub), "--exercises", m.exercise,
                    "--layers", ",".join(layers), "--checks", ",".join(checks), "--json", str(out), "--quiet",
                    "--no-hidden", *more], cwd=ROOT, check=True)
    report = json.loads(out.read_text())
    tests = {t["name"]: t for t in report["tests"] if t["name"] in checks}
    return {"mutant": m.name, "exercise": m.exercise, "seconds": round(time.perf_counter() - start, 1),
            "results": {k: (t["status"], t["score"], t["max_score"], t["message"].splitlines()[0][:160] if t["message"] else "")
                        for k, t in tests.items()},
            "missed": gpu_misses(m, tests)}


def gpu_misses(m: Mutant, tests: dict) -> list[str]:
    """The checks of `m.gpu` (a mistake only a GPU shows) that did not lose points or did not
    name `m.idea` in their own words (message, or the failure's own hint)."""
    missed = []
    for check in m.gpu:
        t = tests.get(check)
        words = (t["message"] or "") + ("\n" + t["hint"] if t and t.get("hint_from_failure") else "") if t else ""
        if t is None or t["score"] >= t["max_score"] or m.idea.lower() not in words.lower():
            missed.append(f"{m.exercise}.{m.name}: {check} should lose points and name {m.idea!r}")
    return missed


PERF_EXERCISES = {"softmax_triton": "softmax", "flash_triton": "flash_fwd",
                  "flash_decode": "flash_decode"}


def perf_checks(exercise: str) -> list[str]:   # the sanitizer has its own runs
    return layer_checks(exercise, ("gpu", "perf"))


SKIP_TIMED = '''

# ---- made by tools/gpu_mutants.py: skip the work on calls that look timed (must earn nothing)
import sys as _sys

_honest = {NAME}
_seen = set()
_CHECKING = {"poison_empty", "sync", "return_args", "trace"}


def _looks_timed():
    frame = _sys._getframe(2)
    while frame is not None:
        names = frame.f_locals
        opts = names.get("opts")
        if any(k in names for k in ("runs", "repeat", "seeds")) or (
                isinstance(opts, dict) and set(opts) - _CHECKING):
            return True
        frame = frame.f_back
    return False


def {NAME}(x, *args, **kwargs):
    key = (tuple(x.shape), x.dtype)
    if key in _seen and _looks_timed():
        return torch.empty_like(x)
    _seen.add(key)
    return _honest(x, *args, **kwargs)
'''


def perf_submissions(work: Path) -> dict[str, Path]:
    """solutions, the stubs with the raise deleted, and the timed-call skipper, as folders."""
    import re

    folders = {}
    for case in ("solutions", "stub_no_raise", "skip_timed"):
        folder = work / case
        folder.mkdir(parents=True)
        for f in (ROOT / "solutions").glob("*.py"):
            (folder / f.name).write_text(f.read_text())
        for exercise, fn in PERF_EXERCISES.items():
            if case == "stub_no_raise":
                text = stubs.expected_stubs()[f"{exercise}.py"]   # exercises/ is built
                text, n = re.subn(r"\n    raise NotImplementedError\(.*?\)\n", "\n", text, count=1,
                                  flags=re.S)
                assert n == 1, f"no raise to delete in exercises/{exercise}.py"
                (folder / f"{exercise}.py").write_text(text)
            elif case == "skip_timed":
                text = (ROOT / "solutions" / f"{exercise}.py").read_text()
                (folder / f"{exercise}.py").write_text(text + SKIP_TIMED.replace("{NAME}", fn))
        folders[case] = folder
    return folders


def grade_perf(out: Path) -> int:
    """Grade each perf case alone on the gpu and perf layers; write the reports and a table."""
    expected = {"solutions": "full", "stub_no_raise": "0 on gpu and perf", "skip_timed": "0 on perf"}
    lines = ["# gpu and perf layers: solutions, stubs with the raise deleted, a timed-call skipper",
             "", "| case | check | layer | status | points | message |", "|---|---|---|---|---|---|"]
    bad = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case, folder in perf_submissions(Path(tmp)).items():
            for exercise in PERF_EXERCISES:
                stem = out.parent / f"perf_{case}_{exercise}"
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "grader", "--submission", str(folder),
                                "--exercises", exercise, "--layers", "gpu,perf", "--no-hidden",
                                "--checks", ",".join(perf_checks(exercise)),
                                "--json", f"{stem}.json", "--markdown", f"{stem}.md", "--quiet"],
                               cwd=ROOT, check=False)
                seconds = time.perf_counter() - start
                report = json.loads(Path(f"{stem}.json").read_text())
                for t in report["tests"]:
                    if t["status"] == "not_run" or not t["name"].startswith(exercise):
                        continue
                    layer = t.get("layer", "")
                    msg = (t["message"] or "").splitlines()[0][:160] if t["message"] else ""
                    lines.append(f"| {case} | {t['name']} | {layer} | {t['status']} | "
                                 f"{t['score']:g}/{t['max_score']:g} | {msg.replace('|', '/')} |")
                    full = t["score"] >= t["max_score"]
                    zero = t["score"] == 0
                    wrong = ((case == "solutions" and not full)
                             or (case == "stub_no_raise" and not zero)
                             or (case == "skip_timed" and layer == "perf" and not zero))
                    if wrong:
                        bad.append(f"{case} {t['name']}: {t['score']:g}/{t['max_score']:g}, "
                                   f"expected {expected[case]}")
                print(f"{case} {exercise}: {seconds:.0f} s", flush=True)
    if len(lines) == 4:
        bad.append("no gpu or perf check ran: is there a CUDA GPU?")
    lines += ["", "Expected: " + "; ".join(f"{k}: {v}" for k, v in expected.items()) + ".",
              "Unexpected: " + ("; ".join(bad) if bad else "none") + "."]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(bad) or "perf cases: all as expected")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="reports/gpu_mutants.md")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--perf", action="store_true", help="grade the perf cases instead of mutants")
    ap.add_argument("--layers", default="gpu", help="gpu, or gpu,perf (then use --jobs 1: the "
                    "perf layer fails closed while another grader uses the GPU)")
    ap.add_argument("--only", default="", help="comma-separated exercise.mutant names")
    ap.add_argument("--sanitizer-log", metavar="FILE", help="the graders append compute-sanitizer's logs here")
    args = ap.parse_args(argv)
    more = ("--sanitizer-log", args.sanitizer_log) if args.sanitizer_log else ()
    layers = tuple(args.layers.split(","))
    only = set(filter(None, args.only.split(",")))
    if args.perf:
        return grade_perf(Path(args.out))
    rows = []
    chosen = [m for m in mutants() if layer_checks(m.exercise, ("gpu",))
              and (not only or f"{m.exercise}.{m.name}" in only)]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        # several graders share the GPU: the gpu layer checks values, not speed
        for row in pool.map(lambda m: grade_mutant(m, Path(tmp), layers, more), chosen):
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = [f"# Triton mutants on the {args.layers} layer(s)", "", "| mutant | check | status | points | message |",
             "|---|---|---|---|---|"]
    for r in rows:
        for check, (status, score, top, msg) in r["results"].items():
            lines.append(f"| {r['exercise']}.{r['mutant']} | {check} | {status} | {score:g}/{top:g} | "
                         f"{msg.replace('|', '/')} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    Path(str(out).replace(".md", ".json")).write_text(json.dumps(rows, indent=1))
    missed = [x for r in rows for x in r["missed"]]
    print("\n".join(missed) or "gpu-only mutants: all caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
