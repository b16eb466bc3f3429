"""Kernel use on the GPU for the Triton exercises, in one command (run on a CUDA machine):

    python tools/gpu_triton.py [--out reports/gpu_triton] [--layers gpu] [--jobs 6]

Grades, on the gpu layer (plus adversarial and interp), solutions/ and every Triton cheat,
wrong case and variant in tests/, each graded on its own exercise, and prints one line per
folder: score, expected, and the first failure (the cases of every tests/exercises/<exercise>/:
tests/cases.py). Expected: solutions and variants full marks; cheats 0 (the profiler sees
cuDNN/flash/cuBLAS/aten kernels from any thread; NVML sees helper processes; the audit refuses
threads and subprocesses), side_stream full (its race shows on the perf layer: tools.gpu_cheats);
wrong cases lose their must_fail checks (max_score 0 where the case says so). Exit status 1 if
any expectation fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cases import cases, folder_files  # noqa: E402
from tests.helpers import by_id, copy_solutions, grade  # noqa: E402

TRITON = ("softmax_triton", "flash_triton", "flash_backward")
LAYERS = "adversarial,interp,gpu"


def folders():
    yield "solutions", ROOT / "solutions", None
    for kind in ("variants", "cheats", "wrong"):
        for d in cases(kind):
            names = [n[:-3] for n in folder_files(d) if n[:-3] in TRITON]
            if names:
                yield kind, d, names[0]


def judge(kind: str, folder: Path, exercise: str | None, out: Path, layers: str) -> tuple[bool, str]:
    exercises = [exercise] if exercise else list(TRITON)
    if kind == "solutions":
        sub = folder
    else:
        sub = copy_solutions(Path(tempfile.mkdtemp()) / "sub", folder_files(folder))
    report = grade(sub, "--exercises", ",".join(exercises), "--layers", layers,
                   json_path=out / f"{kind}-{folder.name}.json")
    results = by_id(report)
    score, top = report["score"], report["max_score"]
    expect = json.loads((folder / "expect.json").read_text()) if (folder / "expect.json").exists() else {}
    if kind in ("solutions", "variants") and not expect:
        ok = score == top
    elif kind == "cheats" and folder.name == "side_stream":
        ok = score == top   # right when read after a synchronize: the race costs perf points only
    elif kind == "cheats":
        ok = score == 0
    else:
        must = expect.get("must_fail", []) or expect.get("loses_only", [])
        ok = all(results[c]["status"] != "passed" for c in must if c in results)
        if expect.get("max_score") == 0:
            ok = ok and score == 0
    first = next((f"{t['name']}: {t['message'][:160]}" for t in report["tests"]
                  if t["status"] not in ("passed", "not_run")), "")
    return ok, f"{'ok ' if ok else 'BAD'} {kind}/{folder.name}: {score}/{top}  {first}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="reports/gpu_triton")
    ap.add_argument("--layers", default=LAYERS, help=f"default {LAYERS}")
    ap.add_argument("--jobs", type=int, default=1, help="folders graded at once")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(judge, *f, out, args.layers) for f in folders()]
        for fut in as_completed(futures):
            ok, line = fut.result()
            failures += not ok
            print(line, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
