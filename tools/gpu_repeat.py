"""Grades that hold still, on a GPU (issue 23): one float16 variant of each Triton extension
exercise graded REPEATS times on the gpu layer, each run with fresh seeds; prints every score
and exits 1 unless each variant got full marks every time. Run on a CUDA machine:

    python3 tools/gpu_repeat.py [--repeats 10] [--jobs 5] [--checks gpu_real_sizes] [--layers gpu]

The variants (tests/exercises/<exercise>/variants/<case>/ marked `steady`) round differently
from the solutions: flash_decode's forms q . k element-wise in float16 (on a GPU, float16 sums
in a tree of adds); flash_backward's computes D = rowsum(dO * O) in float16; softmax_long's
rounds x - max to float16 before the exp. The comparison that must hold still is
flash-attention's rule (grader/judge/answers/compare.py, `baseline=`). --checks: the check names graded
in each exercise (default gpu_real_sizes, the gpu layer's comparison; "all" grades the whole
layer, compute-sanitizer included). --jobs: grades at once, each its own grader and worker on
the one GPU (as tools/gpu_triton.py runs them): nothing here is timed, and the kernels' compiles
(most of a grade's time) spread over the CPU cores. tests/test_steady_grades.py does the same on the CPU, under
the interpreter.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cases import folder_files, steady_variants  # noqa: E402
from tests.helpers import copy_solutions, grade  # noqa: E402

VARIANTS = steady_variants()   # {exercise: its steady variant's folder}


def grade_once(exercise: str, folder: Path, layers: str, checks: str) -> tuple[float, float, list[str]]:
    """One grade of the variant, in a fresh copy of solutions/ with its file in place."""
    sub = copy_solutions(Path(tempfile.mkdtemp()) / "sub", folder_files(folder))
    args = ["--exercises", exercise, "--layers", layers]
    if checks != "all":
        args += ["--checks", ",".join(f"{exercise}.{c}" for c in checks.split(","))]
    report = grade(sub, *args)
    ran = [t for t in report["tests"] if t["exercise"] == exercise and t["status"] != "not_run"]
    lost = [f"{t['name']}: {(t['message'] or '')[:300]}" for t in ran if t["score"] < t["max_score"]]
    return sum(t["score"] for t in ran), sum(t["max_score"] for t in ran), lost


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--layers", default="gpu")
    ap.add_argument("--checks", default="gpu_real_sizes")
    args = ap.parse_args()
    start = time.time()
    runs = [(exercise, folder) for exercise, folder in VARIANTS.items() for _ in range(args.repeats)]
    results = [None] * len(runs)
    # a line as each grade ends, so a run cut short by a timeout still shows what it graded
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(grade_once, *run, args.layers, args.checks): i
                   for i, run in enumerate(runs)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()
            print(f"  {runs[i][0]}: {results[i][0]:g}/{results[i][1]:g} "
                  f"({time.time() - start:.0f} s)", flush=True)
    ok = True
    for exercise, folder in VARIANTS.items():
        name = folder.name
        mine = [r for run, r in zip(runs, results) if run[0] == exercise]
        for i, (score, top, lost) in enumerate(mine, 1):
            print(f"{exercise} {name} run {i}: {score:g}/{top:g}"
                  + "".join(f"\n    lost {line}" for line in lost))
            ok &= top > 0 and score == top
        scores = [score for score, _, _ in mine]
        print(f"{exercise} {name}: scores {[f'{s:g}' for s in scores]} "
              f"({'the same every time' if len(set(scores)) == 1 else 'NOT STEADY'})")
        ok &= len(set(scores)) == 1
    print(f"{'steady' if ok else 'FAILED: a correct variant lost points or its score moved'} "
          f"({len(runs)} grades in {time.time() - start:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
