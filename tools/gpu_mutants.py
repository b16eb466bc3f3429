"""The Triton mutants of tests/mutants, graded on the GPU layer (run on a GPU machine).

    python -m tools.gpu_mutants --out reports/gpu_mutants.md

Each mutant is applied to a copy of solutions/ and only its exercise's gpu checks run
(`--checks`); the table says which of them caught it. The sanitizer runs only for the mutants
that drop a mask (it is slow: a minute per run), which is where it matters.
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

from tests.mutants import Mutant
from tests.test_mutants import ALL

ROOT = Path(__file__).resolve().parent.parent
GPU_CHECKS = {"softmax_triton": ["softmax_triton.gpu_real_sizes"],
              "flash_triton": ["flash_triton.gpu_real_sizes"]}


def grade_mutant(m: Mutant, work: Path) -> dict:
    sub = work / f"{m.exercise}-{m.name}"
    sub.mkdir(parents=True)
    for f in (ROOT / "solutions").glob("*.py"):
        (sub / f.name).write_text(f.read_text())
    (sub / f"{m.exercise}.py").write_text(m.apply((ROOT / "solutions" / f"{m.exercise}.py").read_text()))
    checks = list(GPU_CHECKS[m.exercise])
    if "mask" in m.name:
        checks.append(f"{m.exercise}.sanitizer")
    out = work / f"{m.exercise}-{m.name}.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "--submission", str(sub), "--exercises", m.exercise,
                    "--layers", "gpu", "--checks", ",".join(checks), "--json", str(out), "--quiet",
                    "--no-hidden"], cwd=ROOT, check=True)
    report = json.loads(out.read_text())
    tests = {t["name"]: t for t in report["tests"] if t["name"] in checks}
    return {"mutant": m.name, "exercise": m.exercise, "seconds": round(time.perf_counter() - start, 1),
            "results": {k: (t["status"], t["score"], t["max_score"], t["message"].splitlines()[0][:160] if t["message"] else "")
                        for k, t in tests.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="reports/gpu_mutants.md")
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args(argv)
    rows = []
    chosen = [m for m in ALL if m.exercise in GPU_CHECKS]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        # several graders share the GPU: the gpu layer checks values, not speed
        for row in pool.map(lambda m: grade_mutant(m, Path(tmp)), chosen):
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = ["# Triton mutants on the gpu layer", "", "| mutant | check | status | points | message |",
             "|---|---|---|---|---|"]
    for r in rows:
        for check, (status, score, top, msg) in r["results"].items():
            lines.append(f"| {r['exercise']}.{r['mutant']} | {check} | {status} | {score:g}/{top:g} | "
                         f"{msg.replace('|', '/')} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    Path(str(out).replace(".md", ".json")).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
