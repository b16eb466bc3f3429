"""python -m tools.cost REPORT [--stubs STUBS] [--submissions N]: what grading a class costs.

Reads a grader JSON report (tests[*] with exercise, layer and duration_s; layer_seconds and
elapsed_s at the top) and prints Markdown: the seconds of each exercise in each layer, with the
totals and the wall, then what a class of N submissions costs on one GPU and how to size a Slurm
array of one GPU per task. docs/INSTRUCTORS.md shows its output for the H200 reports kept in
tests/fixtures/cost/ (tests/test_cost.py keeps the two equal).

When the report comes from a GPU other than a GB10 and has the ceilings measured in its run, the
table also estimates the gpu and perf layers on a GB10 (DGX Spark). It is a model, not a
measurement:

    GB10 seconds of a check = fixed + (seconds here - fixed) x ratio
    fixed = the same check's seconds in STUBS (the stubs graded on the same GPU: each check up to
            the stub's first NotImplementedError, a worker started, some of the grader's inputs
            and baselines built), at most the check's own; 0 where STUBS has no time for it
    ratio = this GPU's measured copy GB/s / the GB10's GB/s        memory-bound exercises (BOUND)
            this GPU's measured fp16 matmul TFLOP/s / the GB10's   compute-bound exercises

Everything above the fixed part is taken to be device work, though much of it is not (compiling,
more worker starts, the gate's profiler, verifying outputs on the CPU), and a timed loop spans
about the same time on any device (grader.judge.perf.timing.per_call_ms repeats a call until a fixed
span is covered): the estimate is an upper bound for the same work, the time here a lower bound.
The CPU layers are taken to cost on the Spark what they cost here. Run on a Spark's own report,
the tool prints that report's measured table and no model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from grader.judge.machine.devices import GB10
from tools.gpuinfo import LESSON

LAYERS = ("cpu", "adversarial", "interp", "gpu", "perf")
CPU_LAYERS, GPU_LAYERS = LAYERS[:3], LAYERS[3:]
# What the GPU spends its time on in each exercise's gpu and perf checks (the lesson's counting).
# An exercise not listed gets the larger of the two ratios, so the estimate stays an upper bound.
BOUND = {
    "softmax_triton": "memory",   # one read and one write of the matrix per call
    "softmax_long": "memory",     # the same, for rows of any length
    "flash_decode": "memory",     # K and V read once per query: a few FLOPs per byte
    "bench_attn": "memory",       # naive attention: S and P through HBM, left of the ridge
    "flash_triton": "compute",    # 4 B H N^2 D FLOPs on tiles kept on chip: right of the ridge
    "flash_backward": "compute",  # the forward's FLOPs, and 2.5x them backward
}
GB10_TFLOPS = LESSON["GB10"]["peak_tflops"]   # the lesson's "generous" fp16 figure for the Spark
MARGIN = 1.5            # a Slurm task's time limit over its expected time (slower kernels)
TASK_HOURS = 4.0        # the Slurm recipe's --time (docs/INSTRUCTORS.md)


def ran(report: dict) -> list:
    """The report's checks that ran (a layer left out lists its checks as not_run, 0 s)."""
    return [t for t in report["tests"] if t.get("status") != "not_run"]


def seconds(report: dict) -> dict:
    """{exercise: {layer: seconds}} summed over the report's checks, exercises in report order
    (a layer an exercise has no check run in is absent)."""
    out: dict = {}
    for t in ran(report):
        layers = out.setdefault(t["exercise"], {})
        layers[t["layer"]] = layers.get(t["layer"], 0.0) + float(t["duration_s"])
    return out


def ratios(report: dict, gb10_gbs: float, gb10_tflops: float) -> dict | None:
    """{"memory": r, "compute": r}: how many times slower a GB10 is than the report's GPU, from the
    ceilings measured in the report's run; None without them, or on a GB10 itself."""
    info = report.get("device_info") or {}
    copy, matmul = info.get("copy_gbs"), info.get("matmul_tflops")
    if not copy or not matmul or info.get("profile") == GB10.name:
        return None
    return {"memory": copy / gb10_gbs, "compute": matmul / gb10_tflops}


def gb10_seconds(report: dict, stubs: dict | None, ratio: dict) -> dict:
    """{exercise: {layer: seconds}} the model expects on a GB10 for the gpu and perf layers."""
    fixed = {t["name"]: float(t["duration_s"]) for t in (stubs or {}).get("tests", [])}
    out: dict = {}
    for t in ran(report):
        if t["layer"] not in GPU_LAYERS:
            continue
        here = float(t["duration_s"])
        f = min(here, fixed.get(t["name"], 0.0))
        r = ratio.get(BOUND.get(t["exercise"]), max(ratio.values()))
        layers = out.setdefault(t["exercise"], {})
        layers[t["layer"]] = layers.get(t["layer"], 0.0) + f + (here - f) * r
    return out


def _s(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def table(report: dict, gb10: dict | None) -> list[str]:
    """The Markdown table: a row per exercise, the sums of its checks, the report's own
    layer_seconds, and the wall; with GB10 columns when `gb10` is given."""
    per = seconds(report)
    head = ["exercise", *LAYERS, "sum"]
    if gb10 is not None:
        head += ["GB10 gpu", "GB10 perf", "GB10 sum", "bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(name, cells, total, model=("", "", "", "")):
        out = [name, *(_s(cells.get(k)) for k in LAYERS), _s(total)]
        lines.append("| " + " | ".join(out + (list(model) if gb10 is not None else [])) + " |")

    def modelled(cells, g, bound=""):
        cpu_side = sum(v for k, v in cells.items() if k in CPU_LAYERS)
        return (*(_s(g.get(k)) for k in GPU_LAYERS), _s(cpu_side + sum(g.values())), bound)

    for ex, cells in per.items():
        g = (gb10 or {}).get(ex, {})
        bound = BOUND.get(ex, "larger ratio") if g else ""
        row(ex, cells, sum(cells.values()), modelled(cells, g, bound))
    sums = {k: sum(c.get(k, 0.0) for c in per.values()) for k in LAYERS
            if any(k in c for c in per.values())}
    g_sums = {k: sum(c.get(k, 0.0) for c in (gb10 or {}).values()) for k in GPU_LAYERS}
    row("**sum of checks**", sums, sum(sums.values()), modelled(sums, g_sums))
    given = {k: float(v) for k, v in (report.get("layer_seconds") or {}).items()}
    if given:
        row("layer_seconds (report)", given, sum(given.values()))
    wall = ("", "", _s(wall_gb10(report, gb10)), "") if gb10 is not None else ()
    row("**wall** (elapsed_s)", {}, report["elapsed_s"], wall)
    return lines


def wall_gb10(report: dict, gb10: dict) -> float:
    """The GB10's wall: the report's, with its gpu and perf checks' seconds replaced by the
    model's (the CPU layers run beside them, as they did here)."""
    here = sum(c.get(k, 0.0) for c in seconds(report).values() for k in GPU_LAYERS)
    there = sum(v for c in gb10.values() for v in c.values())
    return float(report["elapsed_s"]) - here + there


def per_submission(report: dict, gb10: dict | None) -> dict:
    """{device: seconds of one submission's grade} for the class cost."""
    out = {_device(report): float(report["elapsed_s"])}
    if gb10 is not None:
        out["a GB10 (at most, model)"] = wall_gb10(report, gb10)
    return out


def _device(report: dict) -> str:
    info = report.get("device_info") or {}
    return info.get("name") or str(report.get("device") or "this machine")


def class_cost(report: dict, gb10: dict | None, n: int) -> list[str]:
    """A class of n submissions one after another on one GPU, and a Slurm array's size."""
    lines, one = [], "one GPU" if (report.get("device_info") or {}).get("cuda") else "one machine"
    for device, s in per_submission(report, gb10).items():
        per_task = max(1, int(TASK_HOURS * 3600 / (MARGIN * s)))
        lines.append(f"- {device}: {n} x {s:.0f} s = {n * s / 3600:.1f} h on {one}, "
                     f"{3600 / s:.1f} submissions per hour. A Slurm task of {one} with "
                     f"`--time={TASK_HOURS:g}:00:00` has room for {per_task} at {MARGIN:g}x that "
                     f"time each (a slower kernel's timed loops run longer): "
                     f"`--array=0-{math.ceil(n / per_task) - 1}` for {n}.")
    return lines


def model_notes(report: dict, stubs_name: str | None, ratio: dict, gbs: float,
                tflops: float) -> list[str]:
    """What the GB10 columns rest on, said with its inputs."""
    info, here = report["device_info"], _device(report)
    by = {b: ", ".join(ex for ex, v in BOUND.items() if v == b) for b in ("memory", "compute")}
    fixed = (f"the same check's seconds in `{stubs_name}` (the stubs graded on the same GPU, each "
             f"check up to the stub's first NotImplementedError: a worker started, some of the "
             f"grader's inputs and baselines built), at most the check's own; 0 where that report "
             f"has no time for it"
             if stubs_name else "0 (no stubs' report given: every second is scaled)")
    return [
        "GB10 columns: **an estimate from a model, not a measurement**. For each gpu and perf "
        f"check, GB10 seconds = fixed + ({here} seconds - fixed) x ratio, where fixed is "
        f"{fixed}; ratio is {ratio['memory']:.1f} for memory-bound exercises ({by['memory']}): "
        f"{info['copy_gbs']:.0f} GB/s of copy measured in this run over the GB10's {gbs:g} GB/s "
        f"(the GB10 profile's spec figure, grader/judge/machine/devices.py), and {ratio['compute']:.1f} "
        f"for "
        f"compute-bound ones ({by['compute']}): {info['matmul_tflops']:.1f} TFLOP/s of fp16 matmul "
        f"measured in this run over {tflops:g} TFLOP/s (the lesson's figure for the Spark, "
        "tools/gpuinfo.py). The CPU layers are taken as they were here; the wall is the run's, "
        "with its gpu and perf seconds replaced by the model's.",
        "It is an upper bound for the same work on a Spark that reaches those figures: all but "
        "the fixed part is scaled, though much of it is compiling, starting more workers and "
        "verifying outputs, and each timed loop spans about the same time on any device "
        f"(grader.judge.perf.timing.per_call_ms); the {here}'s seconds are the lower bound. The perf "
        "checks time the same sizes on every profile (the constants of each test_perf.py); the "
        "tile sweep tries the student's default tiles, then the GB10 profile's shapes that fit "
        "its 99 KB, and stops at the first one well inside full marks, or once the fastest so "
        "far is more than 8 times past no credit: each further shape a Spark needs adds one "
        "timed loop. A measured ceiling below the figures used (`make gpuinfo` on the Spark) "
        "makes it slower: pass it with --gbs, --tflops.",
    ]


TIMED_FIRST_NOTE = "The timed checks ran first"   # grader.run's note, in reports made before the field


def timed_first(report: dict) -> bool:
    """Whether the grade timed first and verified afterwards (grader.schedule.timed_first)."""
    return bool(report.get("timed_first")) or any(
        n.startswith(TIMED_FIRST_NOTE) for n in report.get("notes", []))


def render(report: dict, stubs: dict | None = None, stubs_name: str | None = None,
           n: int = 200, gbs: float | None = None, tflops: float | None = None) -> str:
    """The whole Markdown text the tool prints."""
    gbs = GB10.bandwidth_gbs if gbs is None else gbs
    tflops = GB10_TFLOPS if tflops is None else tflops
    ratio = ratios(report, gbs, tflops)
    gb10 = gb10_seconds(report, stubs, ratio) if ratio else None
    per = seconds(report)
    cpu = sum(v for c in per.values() for k, v in c.items() if k in CPU_LAYERS)
    gpu = sum(v for c in per.values() for k, v in c.items() if k in GPU_LAYERS)
    score = f"{report['score']:g}/{report['max_score']:g}"
    out = [f"Seconds per exercise and layer: the checks' `duration_s` in a grade of "
           f"`{report.get('submission')}` on {_device(report)}, {score}, "
           f"{report['elapsed_s']:.1f} s wall.",
           "\n".join(table(report, gb10))]
    if cpu and gpu:
        out.append(f"The CPU layers ({cpu:.1f} s of checks) ran in parallel processes beside the "
                   f"GPU layers ({gpu:.1f} s), so the wall, {report['elapsed_s']:.1f} s, is less "
                   f"than the sum of the layers, {cpu + gpu:.1f} s.")
    stopped = [t["name"] for t in report["tests"] if t.get("status") == "error"]
    if stopped:
        out.append(f"Stopped by a grader error in this run, their seconds short of a full check: "
                   f"{', '.join(stopped)}.")
    if gb10 is not None:
        out += model_notes(report, stubs_name, ratio, gbs, tflops)
        if timed_first(report):
            out.append("This grade timed first: each perf check's seconds include the "
                       "verification of its timed outputs, which ran after every timing, beside "
                       "the untimed checks, with the GPU and the cores shared. A GB10 grades in "
                       "the earlier order (its memory is the host's), so for its columns prefer "
                       "a report graded with --no-timed-first on this GPU: this one "
                       "overstates them.")
    out.append("\n".join([f"A class of {n}, one submission at a time per GPU:",
                          *class_cost(report, gb10, n)]))
    return "\n\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.cost", description=__doc__.splitlines()[0])
    p.add_argument("report", help="a grader JSON report (make grade-gpu writes reports/grade.json)")
    p.add_argument("--stubs", metavar="JSON", help="the stubs' report on the same GPU")
    p.add_argument("--submissions", type=int, default=200, metavar="N", help="class size")
    p.add_argument("--gbs", type=float, metavar="GB/S",
                   help=f"the GB10's bandwidth (default {GB10.bandwidth_gbs:g})")
    p.add_argument("--tflops", type=float, metavar="TF/S",
                   help=f"the GB10's fp16 TFLOP/s (default {GB10_TFLOPS:g})")
    args = p.parse_args(argv)
    if not Path(args.report).is_file():
        p.error(f"no report at {args.report}: make grade-gpu writes one (reports/grade.json)")
    report = json.loads(Path(args.report).read_text())
    stubs = json.loads(Path(args.stubs).read_text()) if args.stubs else None
    sys.stdout.write(render(report, stubs, args.stubs, args.submissions, args.gbs, args.tflops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
