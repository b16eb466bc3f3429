"""The cheats and the computes-nothing wrong work, graded on the GPU layers (run on a GPU machine).

    python -m tools.gpu_cheats --out reports/gpu_cheats            # everything below
    python -m tools.gpu_cheats --out reports/gpu_cheats --only thread_sdpa,side_stream
    python -m tools.gpu_cheats --out reports/gpu_cheats --no-sanitizer    # faster

Graded, each as a copy of solutions/ with its file(s) in place, on its exercise only, layers
gpu,perf, every check of them (the sanitizer included where it is installed), with the static
audit off for a cheat marked without_audit (the walls behind the audit must hold alone):
  - every cheat of tests/exercises/*/cheats marked "gpu" in its expect.json (tests.cases.Cheat:
    threads, helper processes, the timed-call skip, the probe patch, SDPA or torch.softmax behind
    a launch, unwritten outputs, the bench timers), sdpa_on_cuda (the honest kernel under the
    interpreter, SDPA on CUDA), the timed_*_behind_launch edits and the scores_kept ones (an
    N x N buffer beside a right answer: memory_flat; tests/test_cheats.py), each must earn 0;
  - every tests/exercises/*/wrong case with max_score 0 or "gpu_zero" whose exercise has gpu or
    perf checks (the stubs with their raise deleted, timers that measure nothing, a timer that
    returns a constant), each must earn 0;
  - side_stream, the honest kernel on a side stream, returned before it finishes: it must pass
    gpu_real_sizes (read after a device-wide synchronize) and earn no perf points, with a
    message that names the caller's stream (its timed outputs are not ready there: a race).
Writes <out>/gpu_cheats.md (one row per case and check) and gpu_cheats.json; exits 1 when a case
broke its expectation. The zero cases are graded --jobs at a time (default 4: the perf layer then
times under contention, which can only lower the points of work that computes nothing); the
side_stream runs alone afterwards.
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

from tests.cases import cases as case_folders, cheats, folder_files
from tests.helpers import grader_command
from tests.test_cheats import SCORES_KEPT, SDPA_ON_CUDA, TIMED_BANDWIDTH, TIMED_SDPA

ROOT = Path(__file__).resolve().parent.parent
LAYERS = "gpu,perf"
GPU_EXERCISES = ("softmax_triton", "flash_triton", "bench_attn")


def cases() -> list[dict]:
    """name, exercise, files {name: text}, expect ("zero" or "race")."""
    out = []
    for c in (c for c in cheats() if c.gpu):
        files = folder_files(c.folder)
        out.append({"name": c.name, "kind": "cheat", "exercise": c.exercise, "files": files,
                    "expect": "race" if c.name == "side_stream" else "zero",
                    "zero_on": c.zero_on, "audit": not c.without_audit})
    source = (ROOT / "solutions" / "flash_triton.py").read_text()
    out.append({"name": SDPA_ON_CUDA.name, "kind": "cheat", "exercise": "flash_triton",
                "files": {"flash_triton.py": SDPA_ON_CUDA.apply(source)}, "expect": "zero"})
    for timed in (TIMED_SDPA, *TIMED_BANDWIDTH):   # honest except on timed calls
        file = f"{timed.exercise}.py"
        out.append({"name": timed.name, "kind": "cheat", "exercise": timed.exercise,
                    "files": {file: timed.apply((ROOT / "solutions" / file).read_text())},
                    "expect": "zero", "zero_on": timed.checks})
    for kept in SCORES_KEPT:   # an N x N buffer: graded with the audit off, the replay must hold
        out.append({"name": kept.name, "kind": "cheat", "exercise": kept.exercise,
                    "files": {"flash_triton.py": kept.apply(source)}, "expect": "zero",
                    "zero_on": kept.checks, "audit": False})
    for case in case_folders("wrong"):
        expect = json.loads((case / "expect.json").read_text())
        zero = expect["max_score"] == 0 or expect.get("gpu_zero")
        if zero and expect["exercise"] in GPU_EXERCISES:
            files = folder_files(case)
            out.append({"name": case.name, "kind": "wrong", "exercise": expect["exercise"],
                        "files": files, "expect": "zero"})
    return out


def grade(case: dict, work: Path, sanitizer: bool = True) -> dict:
    sub = work / case["name"]
    sub.mkdir(parents=True)
    for f in (ROOT / "solutions").glob("*.py"):
        (sub / f.name).write_text(f.read_text())
    for name, text in case["files"].items():
        (sub / name).write_text(text)
    out = work / f"{case['name']}.json"
    args = ["--exercises", case["exercise"], "--layers", LAYERS]
    if not sanitizer:
        from grader.registry import all_checks

        args += ["--checks", ",".join(c.id for c in all_checks().values()
                                      if c.exercise == case["exercise"] and c.layer in LAYERS
                                      and not c.id.endswith(".sanitizer"))]
    start = time.perf_counter()
    # a cheat the static audit would refuse is graded with it off: the walls behind it must hold
    proc = subprocess.run([*grader_command(audit=case.get("audit", True)), "--submission",
                           str(sub), *args, "--json", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    row = {k: case[k] for k in ("name", "kind", "exercise", "expect")}
    row["seconds"] = round(time.perf_counter() - start, 1)
    if proc.returncode != 0 or not out.exists():
        row.update(ok=False, score=None, max_score=None, tests=[],
                   problem=f"grader exited {proc.returncode}: {proc.stderr[-600:]}")
        return row
    report = json.loads(out.read_text())
    tests = [t for t in report["tests"] if t["exercise"] == case["exercise"]
             and t["layer"] in LAYERS.split(",")]
    row["tests"] = [{k: t[k] for k in ("name", "status", "score", "max_score", "message")}
                    for t in tests]
    row["score"] = round(sum(t["score"] for t in tests), 3)
    row["max_score"] = round(sum(t["max_score"] for t in tests), 3)
    ran = [t for t in tests if t["status"] != "not_run"]
    if not ran:
        row.update(ok=False, problem="no gpu or perf check ran: " +
                   "; ".join(f"{k}: {v}" for k, v in report.get("layers_not_run", {}).items()
                             if k in LAYERS.split(",")))
    elif case["expect"] == "zero":
        # a cheat honest on every untimed call owes nothing but the checks built to catch it
        zero_on = case.get("zero_on", "all")
        graded = [t for t in ran if zero_on == "all" or t["name"] in zero_on]
        earned = round(sum(t["score"] for t in graded), 3)
        row["ok"] = bool(graded) and earned == 0
        row["problem"] = "" if row["ok"] else (f"earned {earned:g} on {zero_on}" if graded
                                               else f"none of {zero_on} ran")
    else:   # side_stream: right after a device-wide synchronize, a race on the caller's stream
        by = {t["name"]: t for t in tests}
        real = by.get("flash_triton.gpu_real_sizes", {})
        perf = [t for t in tests if t["name"] in ("flash_triton.speed_vs_sdpa",
                                                  "flash_triton.memory_flat")]
        perf_points = sum(t["score"] for t in perf)
        row["ok"] = real.get("status") == "passed" and perf_points == 0 and all(
            "caller's stream" in (t["message"] or "") for t in perf)
        row["problem"] = "" if row["ok"] else (f"gpu_real_sizes {real.get('status')}, perf points "
                                               f"{perf_points:g}")
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["# Cheats and computes-nothing work on the GPU layers (gpu, perf)", "",
             "Each case graded on its exercise only, every gpu and perf check "
             "(`python -m tools.gpu_cheats`). Expected: 0 points, except side_stream (the honest "
             "kernel on a side stream, returned before it finishes: right after a device-wide "
             "synchronize, so gpu_real_sizes passes; its timed outputs, read on the caller's "
             "stream, are not ready, so no perf points).", "",
             "| case | exercise | expected | points | verdict | seconds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        points = "-" if r["score"] is None else f"{r['score']:g}/{r['max_score']:g}"
        verdict = "ok" if r["ok"] else f"**FAIL**: {r['problem']}"
        lines.append(f"| {r['kind']} {r['name']} | {r['exercise']} | {r['expect']} | {points} | "
                     f"{verdict.replace('|', '/')} | {r['seconds']} |")
    lines += ["", "| case | check | status | points | message |", "|---|---|---|---|---|"]
    for r in rows:
        for t in r["tests"]:
            message = (t["message"] or "").splitlines()[0][:200] if t["message"] else ""
            lines.append(f"| {r['name']} | {t['name']} | {t['status']} | "
                         f"{t['score']:g}/{t['max_score']:g} | {message.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="reports/gpu_cheats", help="folder for gpu_cheats.md/.json")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--jobs", type=int, default=4, help="zero cases graded at once")
    ap.add_argument("--no-sanitizer", action="store_true",
                    help="leave out the compute-sanitizer checks (about a minute per run)")
    args = ap.parse_args(argv)
    chosen = cases()
    if args.only:
        names = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = names - {c["name"] for c in chosen}
        if unknown:
            ap.error(f"unknown cases {sorted(unknown)}; known: {sorted(c['name'] for c in chosen)}")
        chosen = [c for c in chosen if c["name"] in names]
    rows = []

    def done(row: dict) -> None:
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("name", "ok", "score", "max_score", "seconds",
                                              "problem")}), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        zero = [c for c in chosen if c["expect"] == "zero"]
        with ThreadPoolExecutor(args.jobs) as pool:
            for row in pool.map(lambda c: grade(c, Path(tmp), not args.no_sanitizer), zero):
                done(row)
        for c in chosen:
            if c["expect"] != "zero":
                done(grade(c, Path(tmp), not args.no_sanitizer))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_cheats.md").write_text(markdown(rows))
    (out / "gpu_cheats.json").write_text(json.dumps(rows, indent=1))
    failed = [r["name"] for r in rows if not r["ok"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases as expected"
          + (f"; not: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
