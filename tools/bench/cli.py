"""The command line of `make bench` (python -m tools.bench): the ceilings, then every declared
benchmark (tools.bench.runner), or the report from synthetic numbers (--dry-run)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from grader.judge.machine import ceilings, devices
from tools.bench import runner

NO_GPU = ("bench: no CUDA GPU on this machine: the GPU benchmarks are skipped (see "
          "docs/SPARK.md); running the NumPy Measure on the CPU (naive vs tiled attention).")
WORKER_FILE = "bench_worker.json"   # no longer written (the student side returns its rows over the codec)
FORMULAS = {"copy_gbs": "2 * bytes / time (a copy reads and writes every byte)",
            "matmul_tflops": "2 * n^3 / time, fp16, n = 8192 unless memory is tight"}


def synthetic():
    """A counting model of a GB10, for --dry-run and the tests: ({name: rows}, ceil)."""
    ceil = dict(device={"name": "GB10 (synthetic)"}, profile=devices.GB10.name,
                spec_bandwidth_gbs=273.0, copy_gbs=240.0, matmul_tflops=105.0, synthetic=True)
    return {b.name: b.synthetic() for b in runner.benchmarks() if b.synthetic}, ceil


def measure_ceilings(torch, device: str):
    """(ceil, profile): the device, its profile, copy GB/s and matmul TFLOP/s measured here."""
    if device == "cpu":
        info = {"cuda": False, "name": "CPU (testing the tool: Triton interpreter, tiny sizes)",
                "profile": devices.UNKNOWN.name}
        profile = devices.UNKNOWN
        copy_kw, mm_kw = dict(nbytes=16 << 20), dict(n=256)
    else:
        info = devices.describe(torch)
        p = torch.cuda.get_device_properties(0)
        profile = devices.profile_for((p.major, p.minor), p.name,
                                      getattr(p, "shared_memory_per_block_optin", None))
        copy_kw, mm_kw = {}, {}
    print(f"bench: {info['name']} -> profile {profile.name}", flush=True)
    ceil = dict(device=info, profile=profile.name, spec_bandwidth_gbs=profile.bandwidth_gbs,
                copy_gbs=ceilings.copy_bandwidth_gbs(torch, device=device, **copy_kw),
                matmul_tflops=ceilings.matmul_tflops(torch, device=device, **mm_kw),
                formulas=dict(FORMULAS, **{b.name: b.formula for b in runner.benchmarks()}))
    print(f"bench: copy {ceil['copy_gbs']:.0f} GB/s (2*bytes/time), fp16 matmul "
          f"{ceil['matmul_tflops']:.1f} TFLOP/s (2*n^3/time)", flush=True)
    return ceil, profile


def measure(args, out: Path) -> int:
    import torch

    size = "cpu" if args.device == "cpu" else "quick" if args.quick else "full"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ceil, profile = measure_ceilings(torch, args.device)
    if args.device != "cpu":
        torch.cuda.empty_cache()              # give the ceilings' buffers back before planning
    budget = ceilings.memory_budget(torch, profile, device=args.device)
    ceil["memory_budget_gb"] = budget / 1e9
    plan = runner.plan_runs(size, budget, Path(args.submission).resolve(), args.device, profile,
                            args.only)
    results, errors = runner.run_student(plan, out, args.timeout)
    ceil["elapsed_s"] = time.perf_counter() - t0
    runner.write_outputs(out, results, ceil, errors, Path(args.submission) / "predictions.md",
                         plan["bhd"])
    print(f"bench: wrote {out}/measure.md, *.json and *.png in {ceil['elapsed_s']:.0f} s")
    return 0


def measure_host(args, out: Path) -> int:
    """No CUDA GPU: the benchmarks declared host=True (NumPy on the CPU), through the same
    launcher and report; nothing here imports torch."""
    import platform

    size = "quick" if args.quick else "full"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # half of what the host has available, minus 1 GiB (ceilings.memory_budget's "cpu" rule)
    budget = max(0, int((ceilings.host_available_bytes() or 0) * 0.5) - (1 << 30))
    plan = runner.plan_runs(size, budget, Path(args.submission).resolve(), "host", None,
                            args.only)
    results, errors = runner.run_student(plan, out, args.timeout)
    cpu = platform.processor() or platform.machine()
    ceil = dict(device={"cuda": False, "name": f"CPU only ({cpu}, {os.cpu_count()} cores)"},
                profile="CPU (NumPy only)", host=True, memory_budget_gb=budget / 1e9,
                elapsed_s=time.perf_counter() - t0,
                formulas={b.name: b.formula for b in runner.benchmarks() if b.host})
    runner.write_outputs(out, results, ceil, errors, Path(args.submission) / "predictions.md",
                         plan["bhd"])
    print(f"bench: wrote {out}/measure.md, *.json and *.png in {ceil['elapsed_s']:.0f} s")
    return 0


def has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main(argv=None) -> int:
    from tools import bench

    ap = argparse.ArgumentParser(prog="python -m tools.bench",
                                 description=bench.__doc__.split("\n")[0])
    ap.add_argument("--submission", default="exercises", help="folder with bench_attn.py, "
                    "flash_triton.py, softmax_triton.py and predictions.md")
    ap.add_argument("--out", default="reports/bench", help="where the report goes")
    ap.add_argument("--quick", action="store_true", help="the short sweeps (N up to 4096, one "
                    "softmax shape)")
    ap.add_argument("--dry-run", action="store_true",
                    help="render the report from synthetic numbers (no GPU, no student code)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: test the tool itself with tiny sizes under TRITON_INTERPRET=1")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds for the student's runs")
    ap.add_argument("--no-cuda", action="store_true", help="measure as on a machine without a GPU")
    ap.add_argument("--only", default="all", choices=["all"] + [b.name for b in runner.benchmarks()],
                    help="one benchmark alone (and the ceilings), e.g. backward: flash_backward's "
                         "forward and backward rows")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.dry_run:
        results, ceil = synthetic()
        runner.write_outputs(out, results, ceil, [], Path(args.submission) / "predictions.md")
        print(f"bench: synthetic report (--dry-run) in {out}/measure.md")
        return 0
    if not Path(args.submission).is_dir():
        print(f"bench: no such folder {args.submission}", file=sys.stderr)
        return 2
    if args.device == "cuda" and (args.no_cuda or not has_gpu()):
        print(NO_GPU, flush=True)
        return measure_host(args, out)
    return measure(args, out)
