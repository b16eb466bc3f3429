"""The shared runner: finds every exercise's benchmarks, plans, checks and times them, writes.

    benchmarks()                         # grader/exercises/<ex>/bench.py's BENCHMARKS, in order
    plan = plan_runs("full", budget, submission, "cuda", profile)
    results, errors = run_student(plan, out, timeout_s)
    write_outputs(out, results, ceil, errors, predictions_path, bhd)

It names no exercise: a folder with a bench.py is benchmarked, one without is skipped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tools.bench.harness import Context, Deadline, measure_row
from tools.bench.spec import fits_all

# per kind of run: the attention shape (B, H, D) and the trusted timer's warmup and repetitions
RUNS = {
    "full": dict(bhd=(1, 32, 128), warmup=10, rep=50),
    "quick": dict(bhd=(1, 32, 128), warmup=5, rep=20),
    "cpu": dict(bhd=(1, 1, 16), warmup=1, rep=2),     # Triton under the interpreter, in seconds
}
# device "host" (no CUDA GPU): only the benchmarks declared host=True, NumPy on the CPU; on a
# GPU those run only when asked for by name (--only numpy): the GPU run measures the GPU


def benchmarks(only: str = "all") -> list:
    """Every exercise folder's declared benchmarks (its bench.py's BENCHMARKS), in their order;
    `only`: the one of that name."""
    from grader import registry

    found = []
    for folder in registry.exercise_dirs():
        if (folder / "bench.py").is_file():
            found += list(registry.exercise_module(folder.name, "bench").BENCHMARKS)
    found.sort(key=lambda b: (b.order, b.name))
    return [b for b in found if only in ("all", b.name)]


def plan_runs(size: str, budget: int, submission: Path, device: str, profile,
              only: str = "all") -> dict:
    """What to run, decided before anything large is allocated: {<benchmark>: x values,
    "skipped": rows not run (each with its note and "bench"), and the run's settings}."""
    run = RUNS[size]
    plan = dict(submission=str(submission), device=device, size=size, bhd=list(run["bhd"]),
                warmup=run["warmup"], rep=run["rep"], skipped=[], selected=[])
    for bench in benchmarks(only):
        if (device == "host" and not bench.host) or (bench.host and device == "cuda"
                                                     and only != bench.name):
            continue
        values = [] if bench.gpu_only and device == "cpu" else bench.x_vals.get(size, [])
        todo, skipped = (bench.plan or fits_all)(values, budget, profile, tuple(run["bhd"]))
        plan[bench.name] = todo
        plan["skipped"] += [dict(row, bench=bench.name) for row in skipped]
        if todo or skipped:
            plan["selected"].append(bench.name)
    return plan


def run_benchmark(bench, ctx: Context, rows: list | None = None) -> list:
    """The benchmark's rows at its planned x values: every trial checked, then timed
    (measure_row); rows are appended to `rows` as they finish (kept when time runs out)."""
    rows = [] if rows is None else rows
    for trial in bench.trials(ctx, ctx.plan.get(bench.name, [])):
        rows += trial if isinstance(trial, list) else [measure_row(bench, trial, ctx)]
    return rows


def finish(bench, rows: list, plan: dict) -> list:
    """Measured rows plus the ones the plan skipped, in the benchmark's own order."""
    rows = rows + [{k: v for k, v in r.items() if k != "bench"} for r in plan["skipped"]
                   if r["bench"] == bench.name]
    return bench.finish(rows) if bench.finish else rows


def run_student(plan: dict, out: Path, timeout_s: float) -> tuple[dict, list]:
    """Every selected benchmark, the submission's code run through the grader's launcher (the
    same sandbox and workers as grading) and timed here: ({name: rows}, problems)."""
    import tempfile

    from grader.sandbox import launcher
    from grader.sandbox.workers import Workers

    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    workers = Workers(Path(plan["submission"]), scratch)
    print(f"bench: student code runs in the sandbox ({workers.isolation})", flush=True)
    ctx = Context(plan, student=workers.get, have={p.stem for p in workers.sources.glob("*.py")},
                  deadline=time.monotonic() + timeout_s)
    results = {}
    selected = [b for b in benchmarks() if b.name in plan["selected"]]
    try:
        for bench in selected:
            try:
                run_benchmark(bench, ctx, results.setdefault(bench.name, []))
            except Deadline:
                raise
            except Exception as e:  # noqa: BLE001 - one broken benchmark leaves the others
                ctx.error(f"benchmark {bench.name}", e)
    except Deadline:
        ctx.errors.append(f"the benchmark was stopped after {timeout_s:.0f} s; the rows below "
                          f"are what it finished")
    finally:
        printed = [text for sub in workers.all() for text in sub.outputs]
        workers.close()
        launcher.remove_tree(scratch)
        with open(out / "bench_worker.log", "w") as log:
            for text in printed:
                log.write(text + "\n")
                for line in text.splitlines()[:20]:
                    print("  |", line.rstrip()[:200], flush=True)
    return {b.name: finish(b, results.get(b.name, []), plan) for b in selected}, ctx.errors


def write_outputs(out: Path, results: dict, ceil: dict, errors, predictions_path,
                  bhd=(1, 32, 128)) -> None:
    """Each benchmark's rows (its json file: a list, or {name: rows} for a file several
    benchmarks share), its plots, ceilings.json and measure.md."""
    from tools.bench import plots, report

    out.mkdir(parents=True, exist_ok=True)
    ran = [b for b in benchmarks() if b.name in results]
    files: dict = {}
    for bench in ran:
        files.setdefault(bench.file, []).append(bench)
    for name, group in files.items():
        data = (results[group[0].name] if len(group) == 1
                else {b.name: results[b.name] for b in group})
        (out / name).write_text(json.dumps(data, indent=1, default=str))
    (out / "ceilings.json").write_text(json.dumps(ceil, indent=1, default=str))
    context = dict(ceil=ceil, bhd=tuple(bhd), preds=report.predictions(predictions_path))
    try:
        for bench in ran:
            plots.render(out, bench, results[bench.name], context)
    except ImportError:
        print("bench: matplotlib is not installed: no plots (pip install matplotlib)")
    (out / "measure.md").write_text(report.measure_markdown(results, ceil, errors,
                                                            predictions_path, bhd))
