"""The lesson's Measure section on this machine: `make bench` (python -m tools.bench).

    python -m tools.bench --submission exercises --out reports/bench [--quick]
    python -m tools.bench --dry-run --out /tmp/bench       # synthetic numbers, no GPU needed
    python -m tools.bench --device cpu --out /tmp/bench    # tiny sizes under TRITON_INTERPRET=1
    python -m tools.bench --submission solutions --only backward --out reports/bench_backward

What it does, on a CUDA machine:
  1. ceilings, timed here (the trusted process):
       copy bandwidth   GB/s    = 2 * bytes / time           (a device copy reads and writes)
       fp16 matmul      TFLOP/s = 2 * n^3 / time, n = 8192
  2. plans the runs: naive attention runs at N only if its S and P fit (estimated first, never
     allocated to find out: on a unified-memory GB10 that can stall the whole machine);
  3. runs the submission's own code through the grader's launcher (the same sandbox and
     workers as grading): bench_attn.run_sweep one N at a time (its own timer: the exercise);
     then flash_fwd at the tile shapes that fit this chip's shared memory (plus Break It 5's
     256 x 256) and softmax GB/s of softmax, softmax_eager, each checked against PyTorch and
     timed here on this process's clock like the perf layer (grader.judge.timing.per_call_ms),
     beside the SDPA backends and torch.softmax timed the same way;
     extension track: flash_decode GB/s against L; flash_backward's flash_fwd and flash_bwd
     (o and L from its own flash_fwd) against N, causal and not, beside SDPA's fastest backend
     forward and backward (torch.autograd.grad on a kept graph), each output checked once per
     N against SDPA (a plain call) and then timed like the perf layer;
  4. writes attn_bench.json, softmax_bench.json, tiles.json, ceilings.json, four PNG plots and
     measure.md: the Measure tables with the predictions from <submission>/predictions.md beside
     what was measured (plus decode_bench.json, backward_bench.json and their plots).

Attention: B = 1, H = 32, D = 128, float16, forward. TFLOP/s = 4*B*H*N^2*D / time.
Backward (flash_backward): the same B, H, D; forward FLOPs 4*B*H*N^2*D, halved when causal;
backward FLOPs 2.5x the forward's (two matmuls forward, five backward).
Softmax: float16 rows, GB/s = 2 * rows * cols * 2 bytes / time (read once, write once).
Without a CUDA GPU it prints one line and exits 0, writing nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.judge import ceilings, devices  # noqa: E402

IMPLS = ("naive", "sdpa", "mine")
SOFTMAX_IMPLS = ("softmax", "softmax_eager", "torch.softmax")
BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
BREAK_IT_5 = (256, 256, 8, 3)          # BLOCK_M = BLOCK_N = 256 with D = 128: too much SRAM

# sizes per kind of run: attention Ns, (B, H, D), softmax shapes, tile-sweep N, timer reps
SIZES = {
    "full": dict(ns=[512, 1024, 2048, 4096, 8192, 16384], bhd=(1, 32, 128),
                 softmax=[(4096, 4096), (32768, 1024), (32768, 4096)], tile_n=4096,
                 tiles=None, warmup=10, rep=50, bwd_ns=[1024, 2048, 4096, 8192, 16384]),
    "quick": dict(ns=[512, 1024, 2048, 4096], bhd=(1, 32, 128), softmax=[(4096, 4096)],
                  tile_n=4096, tiles=3, warmup=5, rep=20, bwd_ns=[1024, 2048, 4096]),
    # CPU, for testing the tool: Triton under the interpreter, sizes it can run in seconds
    "cpu": dict(ns=[32, 64], bhd=(1, 1, 16), softmax=[(8, 100)], tile_n=32,
                tiles=[(16, 16, 4, 1)], warmup=1, rep=2, bwd_ns=[48]),
}
NO_GPU = ("bench: no CUDA GPU on this machine; `make bench` measures kernels on a GPU "
          "(see docs/SPARK.md). To see the report from synthetic numbers: "
          "python -m tools.bench --dry-run --out /tmp/bench")
WORKER_FILE = "bench_worker.json"   # no longer written (the student side returns its rows over the codec)


# ===================================================================== the student's code


class Deadline(Exception):
    pass


def run_student(plan: dict, out: Path, timeout_s: float) -> dict:
    """Run the submission's code through the grader's launcher (the same sandbox and worker as
    grading) and time it here, on this process's clock: the student's process never times
    anything but its own sweep (bench_attn.run_sweep with its own timer: that is the exercise).

    Returns {"attn": the sweep's rows, "backends", "tiles", "softmax", "errors"}."""
    import tempfile

    import numpy as np
    import torch
    import torch.nn.functional as F

    from grader import errors as student_errors
    from grader.judge.inputs import seeded, torch_randn
    from grader.sandbox import launcher
    from grader.wire.codec import Trusted

    device, (B, H, D) = plan["device"], plan["bhd"]
    mode = "interp" if device == "cpu" else "cuda"
    result = {"attn": [], "backends": [], "tiles": [], "softmax": [], "decode": [], "backward": [],
              "errors": []}
    deadline = time.monotonic() + timeout_s
    scratch = Path(tempfile.mkdtemp(prefix="bench-"))
    workers = launcher.Workers(Path(plan["submission"]), scratch)
    sources = workers.sources
    print(f"bench: student code runs in the sandbox ({workers.isolation})", flush=True)

    def student(exercise):
        sub = workers.get(exercise, mode)
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline
        sub.timeout_s = left
        return sub

    def first_line(e):
        return (str(e).strip().splitlines() or [""])[0]

    def error(where, e):
        text = f"{where}: {type(e).__name__}: {first_line(e)}"
        result["errors"].append(text)
        print("bench:", text, flush=True)
        return text

    def student_ms(sub, fn, args, kwargs, tensors=None, reference=None):
        if device == "cpu":   # testing the tool: the round trip of a call, best of two
            return 1e3 * min(sub.call(fn, *args, opts={"discard": True}, **kwargs).wall_s
                             for _ in range(2))
        from grader.judge import timing

        # the grader's perf harness (grader.judge.timing): argument 0 refilled before every
        # call, a checksum after, and the outputs verified afterwards against `reference`
        reqs = timing.Requests(sub, fn, list(args), kwargs=kwargs, rng=np.random.default_rng(),
                               reference=reference, inputs=list(tensors), dtype="float16",
                               what=fn)
        ms = timing.per_call_ms(reqs)
        reqs.verify()
        return ms

    def trusted_ms(fn, args, target_ms=150.0):
        if device == "cpu":
            return ceilings.time_cuda(lambda: fn(*args), warmup=plan["warmup"], rep=plan["rep"],
                                      device=device)
        from grader.judge import timing

        # the same harness on trusted code; argument 0 is refilled, so it gets a copy
        return timing.per_call_ms(timing.local_request(fn, [args[0].clone(), *args[1:]]),
                                  target_ms=target_ms)

    def inputs(shape, count):
        seeds = [int(x) for x in np.random.default_rng().integers(0, 2**31 - 1, size=count)]
        markers = [seeded(shape, "float16", device, s) for s in seeds]
        tensors = [torch_randn(shape, "float16", device, s) for s in seeds]
        return markers, tensors

    def max_err(value, ref) -> float:
        arr = getattr(value, "array", None)
        if arr is None or tuple(arr.shape) != tuple(ref.shape):
            raise AssertionError(f"returned {value!r}, not a tensor of shape {tuple(ref.shape)}")
        return float(np.nanmax(np.abs(arr.astype(np.float64) - ref.float().cpu().numpy())))

    try:
        if plan.get("only") == "backward":    # --only backward: the extension's rows alone
            result["backward"] = bench_backward(
                plan, student if (sources / "flash_backward.py").is_file() else None,
                inputs, trusted_ms, error)
            return result
        # 1. the student's own sweep, one N at a time with the impls planned for that N
        where = {"naive": ("bench_attn", "naive"), "sdpa": ("bench_attn", "sdpa"),
                 "mine": ("flash_triton", "flash_fwd")}
        have = {name for name, (module, _) in where.items() if (sources / f"{module}.py").is_file()}
        todo = "naive" not in have
        if todo:
            error("import", FileNotFoundError("bench_attn.py is not in the submission"))
        dtype = Trusted("dtype", params={"dtype": "float16"})
        for item in plan["attn"]:
            names = [name for name in item["impls"] if name in have]
            while names and not todo:
                impls = {name: Trusted("submission_function", params=dict(zip(("module", "name"), where[name])))
                         for name in names}
                try:
                    rows = student("bench_attn").run_sweep(Ns=[item["N"]], B=B, H=H, D=D, dtype=dtype,
                                                            device=device, out_path=None, impls=impls)
                    result["attn"] += [r for r in rows or [] if isinstance(r, dict)]
                    break
                except (student_errors.StudentProblem, student_errors.GraderError) as e:
                    error("bench_attn.run_sweep" + (f" at N={item['N']}" if "mine" not in names else ""), e)
                    if isinstance(e, student_errors.StudentTimeout):
                        raise Deadline from None
                    if "mine" in names:            # flash_fwd is a TODO or broken: naive and sdpa
                        names.remove("mine")
                        have.discard("mine")
                    elif isinstance(e, student_errors.NotImplementedByStudent):
                        todo = True                # time_proper is a TODO: nothing can be timed
                    else:
                        break

        # 2. SDPA backends (timed here, no student code), and flash_fwd at each tile shape
        N = plan["tile_n"]
        markers, (q, k, v) = inputs((B, H, N, D), 3)
        flops = 4 * B * H * N * N * D
        from torch.nn.attention import SDPBackend, sdpa_kernel

        for name in BACKENDS:
            row = dict(N=N, backend=name, ms=None, tflops=None, error=None)
            try:
                with sdpa_kernel(getattr(SDPBackend, name)):
                    F.scaled_dot_product_attention(q, k, v)
                    row["ms"] = trusted_ms(F.scaled_dot_product_attention, (q, k, v))
                row["tflops"] = flops / row["ms"] / 1e9
            except RuntimeError as e:
                row["error"] = first_line(e)[:200] or "RuntimeError"
            result["backends"].append(row)
        if "mine" in have:
            ref = F.scaled_dot_product_attention(q, k, v)
            takes_warps = True
            for cfg in plan["tiles"] + [list(BREAK_IT_5)]:
                kw = dict(BLOCK_M=cfg[0], BLOCK_N=cfg[1])
                if takes_warps:
                    kw.update(num_warps=cfg[2], num_stages=cfg[3])
                row = dict(N=N, BLOCK_M=cfg[0], BLOCK_N=cfg[1], num_warps=kw.get("num_warps"),
                           num_stages=kw.get("num_stages"), ms=None, tflops=None, error=None,
                           break_it=list(cfg) == list(BREAK_IT_5))
                try:
                    flash = student("flash_triton")
                    try:
                        out_value = flash.call("flash_fwd", *markers, **kw).value
                    except student_errors.StudentRaised as e:
                        if not (takes_warps and "unexpected keyword" in str(e)):
                            raise
                        takes_warps = False
                        kw = dict(BLOCK_M=cfg[0], BLOCK_N=cfg[1])
                        row.update(num_warps=None, num_stages=None)
                        out_value = flash.call("flash_fwd", *markers, **kw).value
                    err = max_err(out_value, ref)
                    if not err <= 2e-2:
                        raise AssertionError(f"wrong result, max abs error {err:.2e} against SDPA")
                    from grader.judge import gpu as g

                    row["ms"] = student_ms(flash, "flash_fwd", markers, kw, (q, k, v),
                                           lambda i: g.attention_reference(*i))
                    row["tflops"] = flops / row["ms"] / 1e9
                except Deadline:
                    raise
                except (student_errors.StudentProblem, student_errors.GraderError, AssertionError) as e:
                    # "out of resources: shared memory" is the expected one
                    message = str(e).strip()
                    found = re.search(r"(OutOfResources[^\n]*|out of resources[^\n]*)", message)
                    row["error"] = (found.group(1) if found else f"{type(e).__name__}: {message}")[:300]
                result["tiles"].append(row)
        q = k = v = ref = None

        # 3. softmax GB/s: the fused kernel, the eager one (the student's, timed here), PyTorch's
        for rows, cols in plan["softmax"]:
            markers, (x,) = inputs((rows, cols), 1)
            ref = torch.softmax(x.float(), dim=-1)
            nbytes = 2 * rows * cols * 2
            for name in SOFTMAX_IMPLS:
                row = dict(rows=rows, cols=cols, impl=name, bytes=nbytes, ms=None, gbs=None, error=None)
                try:
                    if name == "torch.softmax":
                        row["ms"] = trusted_ms(lambda t: torch.softmax(t, dim=-1), (x,))
                    else:
                        if not (sources / "softmax_triton.py").is_file():
                            raise RuntimeError("softmax_triton.py is not in the submission")
                        sm = student("softmax_triton")
                        err = max_err(sm.call(name, *markers).value, ref)
                        if not err <= 5e-3:
                            raise AssertionError(f"wrong result, max abs error {err:.2e}")
                        from grader.judge import gpu as g

                        row["ms"] = student_ms(sm, name, markers, {}, (x,),
                                               lambda i: g.softmax_reference(i[0]))
                    row["gbs"] = nbytes / row["ms"] / 1e6
                except Deadline:
                    raise
                except Exception as e:  # noqa: BLE001 - a row that could not be measured says why
                    row["error"] = f"{type(e).__name__}: {first_line(e)[:200]}"
                result["softmax"].append(row)

        # 4. flash_decode GB/s against L (extension track; on a GPU only: the interpreter is
        #    far too slow at decode's sizes): the submission's function through the launcher,
        #    timed and verified like the perf layer, K and V bytes read once per call
        if device != "cpu" and (sources / "flash_decode.py").is_file():
            from grader.exercises.flash_decode.test_flash_decode import gpu_decode_reference
            from grader.judge.inputs import tensor

            DB, DHq, DD = plan.get("decode_bhd", (8, 32, 128))
            for Hkv, L in plan.get("decode", ()):
                nbytes = 2 * DB * Hkv * L * DD * 2
                row = dict(L=L, Hkv=Hkv, B=DB, Hq=DHq, D=DD, impl="flash_decode", bytes=nbytes,
                           ms=None, gbs=None, error=None)
                try:
                    mq, (dq,) = inputs((DB, DHq, DD), 1)
                    mkv, (dk, dv) = inputs((DB, Hkv, L, DD), 2)
                    lens = np.full(DB, L, np.int32)
                    markers = [*mq, *mkv, tensor(lens, "int32", device=device, poison=0.0)]
                    dec = student("flash_decode")
                    row["ms"] = student_ms(dec, "flash_decode", markers, {}, (dq, dk, dv, lens),
                                           lambda i: gpu_decode_reference(*i))
                    row["gbs"] = nbytes / row["ms"] / 1e6
                except Deadline:
                    raise
                except Exception as e:  # noqa: BLE001 - a row that could not be measured says why
                    row["error"] = f"{type(e).__name__}: {first_line(e)[:200]}"
                result["decode"].append(row)
                dq = dk = dv = None
                torch.cuda.empty_cache()

        # 5. flash_backward (extension track): forward and backward TFLOP/s against N
        if plan.get("bwd"):
            result["backward"] = bench_backward(
                plan, student if (sources / "flash_backward.py").is_file() else None,
                inputs, trusted_ms, error)
    except Deadline:
        result["errors"].append(f"the benchmark was stopped after {timeout_s:.0f} s; the rows "
                                f"below are what it finished")
    finally:
        printed = [text for sub in workers.all() for text in sub.outputs]
        workers.close()
        launcher.remove_tree(scratch)
        with open(out / "bench_worker.log", "w") as log:
            for text in printed:
                log.write(text + "\n")
                for line in text.splitlines()[:20]:
                    print("  |", line.rstrip()[:200], flush=True)
    return result


BWD_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")
BWD_TARGET_MS = 60.0   # per_call_ms's span for these rows: 40 timings per run, `make bench` ~2 min


def attention_flops(B: int, H: int, N: int, D: int, causal: bool, backward: bool) -> float:
    """4*B*H*N^2*D for the forward (two matmuls of 2*N^2*D each per head), halved when causal;
    the backward counts 2.5x the forward (five matmuls, the recomputation of S included)."""
    flops = 4 * B * H * N * N * D / (2 if causal else 1)
    return 2.5 * flops if backward else flops


def bench_backward(plan: dict, student, inputs, trusted_ms, error) -> list[dict]:
    """flash_backward's flash_fwd and flash_bwd, and SDPA forward and backward, at each N of
    plan["bwd"], causal and not: rows {N, causal, impl ("mine" | "sdpa"), pass ("fwd" | "bwd"),
    ms, tflops, backend, error}.

    student(exercise) -> the submission's worker, or None when it has no flash_backward.py. Per
    (N, causal): one plain call of flash_fwd, its o checked against SDPA; one plain call of
    flash_bwd on that o and L, its dq, dk, dv checked against SDPA's gradients; then each is
    timed like the perf layer (timing.per_call_ms: R calls back to back in one request, argument
    q or dO refilled before each call), on this process's clock. SDPA: every backend, the
    fastest kept; its backward is torch.autograd.grad on a kept graph, dO refilled each call."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from grader import errors as student_errors
    from grader.judge.inputs import tensor

    device, (B, H, D) = plan["device"], plan["bhd"]
    rows = []
    # no flash_backward.py, or a stub: said once (at the first N), then the same for every row
    missing = None if student else "flash_backward.py is not in the submission"
    said = False

    def first_line(e):
        return (str(e).strip().splitlines() or [""])[0]

    def runs_ms(sub, fn, args, kwargs, arg):
        if device == "cpu":   # testing the tool: the round trip of a call, best of two
            return 1e3 * min(sub.call(fn, *args, **kwargs).wall_s for _ in range(2))
        from grader.judge import timing

        rng = np.random.default_rng()

        def request(repeat: int) -> float:
            start = time.perf_counter()
            sub.call(fn, *args, opts={"runs": timing.runs_spec(rng, 1 + repeat, arg)}, **kwargs)
            return (time.perf_counter() - start) * 1e3

        return timing.per_call_ms(request, target_ms=BWD_TARGET_MS)

    def off_by(value, ref, what):
        arr = getattr(value, "array", None)
        if arr is None or tuple(arr.shape) != tuple(ref.shape):
            raise AssertionError(f"{what}: returned {type(value).__name__}, not a tensor of shape "
                                 f"{tuple(ref.shape)}")
        r = ref.double().cpu().numpy()
        err = float(np.nanmax(np.abs(arr.astype(np.float64) - r))) if np.isfinite(arr).all() \
            else float("inf")
        tol = 2e-2 * max(1.0, float(np.abs(r).max()))
        if not err <= tol:
            raise AssertionError(f"{what}: wrong result, max abs error {err:.2e} against SDPA "
                                 f"(allowed {tol:.1e})")

    def sdpa_context(backend):
        if device == "cpu" or backend is None:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel(getattr(SDPBackend, backend))

    for N in plan["bwd"]:
        for causal in (False, True):
            fl = {p: attention_flops(B, H, N, D, causal, p == "bwd") for p in ("fwd", "bwd")}
            markers, (q, k, v, do) = inputs((B, H, N, D), 4)
            base = dict(N=N, B=B, H=H, D=D, causal=causal, ms=None, tflops=None, backend=None,
                        error=None)
            # SDPA: the fastest backend, forward and backward
            best = {"fwd": dict(base, impl="sdpa", **{"pass": "fwd"}),
                    "bwd": dict(base, impl="sdpa", **{"pass": "bwd"})}
            failures = []
            for backend in (BWD_BACKENDS if device != "cpu" else (None,)):
                try:
                    with sdpa_context(backend):
                        sdpa = lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal)
                        sdpa(q, k, v)
                        timed = {"fwd": trusted_ms(sdpa, (q, k, v), BWD_TARGET_MS)}
                        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                        out = sdpa(*leaves)
                        grad = lambda g: torch.autograd.grad(out, leaves, g, retain_graph=True)
                        grad(do)
                        timed["bwd"] = trusted_ms(grad, (do.clone(),), BWD_TARGET_MS)
                        out = leaves = None
                except RuntimeError as e:
                    failures.append(f"{backend}: {first_line(e)[:120]}")
                    continue
                for p, ms in timed.items():
                    if best[p]["ms"] is None or ms < best[p]["ms"]:
                        best[p].update(ms=ms, tflops=fl[p] / ms / 1e9, backend=backend or "default")
            for row in best.values():
                if row["ms"] is None:
                    row["error"] = "; ".join(failures)[:300] or "no SDPA backend ran"
                rows.append(row)
            # the submission's flash_fwd, then flash_bwd on its own o and L
            mine = {p: dict(base, impl="mine", **{"pass": p}) for p in ("fwd", "bwd")}
            try:
                if missing:
                    raise FileNotFoundError(missing)
                sub = student("flash_backward")
                got = sub.call("flash_fwd", *markers[:3], causal=causal).value
                if not isinstance(got, (tuple, list)) or len(got) != 2:
                    raise AssertionError(f"flash_fwd returned {type(got).__name__}, not (o, lse)")
                with torch.no_grad():
                    off_by(got[0], F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                           "flash_fwd's o")
                if getattr(got[1], "array", None) is None or got[1].array.shape != (B, H, N):
                    raise AssertionError(f"flash_fwd's lse: returned {type(got[1]).__name__}, "
                                         f"not a tensor of shape {(B, H, N)}")
                o, lse = (tensor(t.array, dt, device=device)
                          for t, dt in zip(got, ("float16", "float32")))
                got = None
                mine["fwd"]["ms"] = runs_ms(sub, "flash_fwd", markers[:3], dict(causal=causal), 0)
                bwd_args = [*markers[:3], o, lse, markers[3]]
                grads = sub.call("flash_bwd", *bwd_args, causal=causal).value
                if not isinstance(grads, (tuple, list)) or len(grads) != 3:
                    raise AssertionError(f"flash_bwd returned {type(grads).__name__}, not (dq, dk, dv)")
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
                ref = torch.autograd.grad(out, leaves, do)
                for name, g, r in zip(("dq", "dk", "dv"), grads, ref):
                    off_by(g, r, f"flash_bwd's {name}")
                grads = ref = out = leaves = None
                mine["bwd"]["ms"] = runs_ms(sub, "flash_bwd", bwd_args, dict(causal=causal), 5)
            except Deadline:
                raise
            except (student_errors.StudentProblem, student_errors.GraderError, AssertionError,
                    FileNotFoundError, RuntimeError) as e:
                text = ""
                if not (missing and said):
                    text = error(f"flash_backward at N={N}, causal={causal}", e)
                if isinstance(e, student_errors.NotImplementedByStudent):
                    missing = missing or text
                said = said or bool(missing)
                text = missing or text
                for row in mine.values():
                    row["error"] = row["error"] or text[:300]
            for p, row in mine.items():
                if row["ms"] is not None:
                    row["tflops"] = fl[p] / row["ms"] / 1e9
                    row["error"] = None
                rows.append(row)
            q = k = v = do = None
            if device != "cpu":
                torch.cuda.empty_cache()
    return rows


# ===================================================================== the trusted process


DECODE_RUNS = ((8, 4096), (8, 16384), (8, 32768), (8, 65536), (8, 131072),
               (32, 4096), (32, 32768), (32, 131072))   # (Hkv, L) at B = 8, Hq = 32, D = 128


def plan_runs(sizes: dict, budget: int, submission: Path, device: str, profile) -> dict:
    """What to run, decided before anything large is allocated."""
    B, H, D = sizes["bhd"]
    attn, skipped = [], []
    for N in sizes["ns"]:
        impls = []
        for name in IMPLS:
            need = (ceilings.naive_attention_bytes(B, H, N, D, "float16") if name == "naive"
                    else ceilings.attention_io_bytes(B, H, N, D, "float16"))
            if need <= budget:
                impls.append(name)
            else:
                skipped.append(dict(N=N, impl=name, ms=None, tflops=None, peak_gb=None,
                                    note=f"not run: needs ~{need / 1e9:.1f} GB, over the "
                                         f"{budget / 1e9:.1f} GB budget"))
        if impls:
            attn.append(dict(N=N, impls=impls))
    softmax = [s for s in sizes["softmax"] if 8 * s[0] * s[1] * 2 <= budget]
    tiles = sizes["tiles"]
    if tiles is None:
        tiles = [list(c) for c in profile.flash_configs]
    elif isinstance(tiles, int):                # --quick: the largest shapes that fit
        tiles = [list(c) for c in profile.flash_configs][-tiles:]
    return dict(submission=str(submission), device=device, bhd=list(sizes["bhd"]),
                attn=attn, skipped=skipped, softmax=softmax, tile_n=sizes["tile_n"],
                tiles=tiles, warmup=sizes["warmup"], rep=sizes["rep"],
                decode=[] if device == "cpu" else
                [list(c) for c in DECODE_RUNS if 3 * 2 * 8 * c[0] * c[1] * 128 * 2 <= budget],
                decode_bhd=[8, 32, 128],
                # q, k, v, o, dO, dq, dk, dv and SDPA's kept graph and gradients: ~16 tensors
                bwd=[n for n in sizes.get("bwd_ns", []) if 16 * B * H * n * D * 2 <= budget])


def _num(x):
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def clean_attn_rows(rows, skipped) -> list[dict]:
    """Keep well-formed rows (N, impl, ms, tflops, peak_gb), add the skipped ones, sort."""
    out = []
    for r in rows or []:
        if isinstance(r, dict) and r.get("impl") in IMPLS and isinstance(r.get("N"), int):
            out.append(dict(N=r["N"], impl=r["impl"], ms=_num(r.get("ms")),
                            tflops=_num(r.get("tflops")), peak_gb=_num(r.get("peak_gb"))))
    out += skipped
    return sorted(out, key=lambda r: (r["N"], IMPLS.index(r["impl"])))


def measure(args, out: Path) -> int:
    sizes = SIZES["cpu" if args.device == "cpu" else "quick" if args.quick else "full"]
    import torch

    if args.device == "cpu":
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
    out.mkdir(parents=True, exist_ok=True)
    print(f"bench: {info['name']} -> profile {profile.name}", flush=True)
    t0 = time.perf_counter()
    ceil = dict(device=info, profile=profile.name, spec_bandwidth_gbs=profile.bandwidth_gbs,
                copy_gbs=ceilings.copy_bandwidth_gbs(torch, device=args.device, **copy_kw),
                matmul_tflops=ceilings.matmul_tflops(torch, device=args.device, **mm_kw),
                formulas={"copy_gbs": "2 * bytes / time (a copy reads and writes every byte)",
                          "matmul_tflops": "2 * n^3 / time, fp16, n = 8192 unless memory is tight",
                          "attention_tflops": "4 * B * H * N^2 * D / time",
                          "softmax_gbs": "2 * rows * cols * 2 bytes / time"})
    print(f"bench: copy {ceil['copy_gbs']:.0f} GB/s (2*bytes/time), fp16 matmul "
          f"{ceil['matmul_tflops']:.1f} TFLOP/s (2*n^3/time)", flush=True)
    if args.device != "cpu":
        torch.cuda.empty_cache()              # give the ceilings' buffers back before planning
    budget = ceilings.memory_budget(torch, profile, device=args.device)
    ceil["memory_budget_gb"] = budget / 1e9
    plan = plan_runs(sizes, budget, Path(args.submission).resolve(), args.device, profile)
    plan["only"] = args.only
    result = run_student(plan, out, args.timeout)
    attn = clean_attn_rows(result.get("attn"), plan["skipped"])
    ceil["elapsed_s"] = time.perf_counter() - t0
    write_outputs(out, attn, result.get("softmax", []), ceil, result.get("backends", []),
                  result.get("tiles", []), result.get("errors", []),
                  Path(args.submission) / "predictions.md", plan["bhd"],
                  decode=result.get("decode", []), backward=result.get("backward", []))
    print(f"bench: wrote {out}/measure.md, *.json and *.png in {ceil['elapsed_s']:.0f} s")
    return 0


# ===================================================================== predictions


_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*([kK]?)")
_SHAPE = re.compile(r"(\d[\d,]*\s*[kK]?)\s*[x×X*]\s*(\d[\d,]*\s*[kK]?)")
_ATTN_ALIASES = {"naive": "naive", "eager": "naive", "sdpa": "sdpa", "mine": "mine",
                 "yours": "mine", "flash": "mine", "flash_fwd": "mine", "triton": "mine"}
_SOFTMAX_ALIASES = {"softmax": "softmax", "softmax (triton)": "softmax", "triton": "softmax",
                    "fused": "softmax", "softmax_eager": "softmax_eager", "eager": "softmax_eager",
                    "torch.softmax": "torch.softmax", "torch": "torch.softmax"}


def parse_number(cell: str):
    """'64', '~64 ms', '8.6 GB', '1,024', '8K' -> float; blank, '?' or '-' -> None."""
    m = _NUMBER.search(cell or "")
    if not m:
        return None
    value = float(m.group(0).rstrip("kK \t").replace(",", ""))
    return value * 1024 if m.group(1) else value


def _parse_shape(cell: str):
    m = _SHAPE.search(cell or "")
    return (int(parse_number(m.group(1))), int(parse_number(m.group(2)))) if m else None


def _tables(text: str):
    """Markdown tables as (header cells, data rows), lowercased and stripped of backticks."""
    table = []
    for line in text.splitlines() + [""]:
        if line.strip().startswith("|"):
            cells = line.strip().strip("|").split("|")
            table.append([c.strip().strip("`*").strip().lower() for c in cells])
            continue
        if len(table) >= 2:
            rows = [r for r in table[1:] if not all(set(c) <= set("-: ") for c in r)]
            yield table[0], rows
        table = []


def parse_predictions(text: str) -> dict:
    """The student's predictions from predictions.md.

    Returns {"attn": {(N, impl): {"ms": float|None, "peak_gb": float|None}},
             "softmax": {(rows, cols, impl): {"gbs": float|None}}}. Blank cells are None;
    tables are recognised by their headers (N / impl / ms / GB, or shape / impl / GB/s).
    """
    found = {"attn": {}, "softmax": {}}
    for header, rows in _tables(text):
        col = {name: i for i, name in enumerate(header)}
        impl_i = next((i for i, h in enumerate(header) if "impl" in h), None)
        gbs_i = next((i for i, h in enumerate(header) if "gb/s" in h), None)
        if impl_i is None:
            continue
        for r in rows:
            r = r + [""] * (len(header) - len(r))
            impl = r[impl_i]
            if gbs_i is not None:
                shape_i = next((i for i, h in enumerate(header) if "shape" in h or "rows" in h), 0)
                shape = _parse_shape(r[shape_i])
                name = _SOFTMAX_ALIASES.get(impl)
                if shape and name:
                    found["softmax"][(*shape, name)] = {"gbs": parse_number(r[gbs_i])}
                continue
            ms_i = next((i for i, h in enumerate(header) if re.search(r"\bms\b", h)), None)
            gb_i = next((i for i, h in enumerate(header) if re.search(r"\bgb\b", h)), None)
            n = parse_number(r[col.get("n", 0)])
            name = _ATTN_ALIASES.get(impl)
            if n and name:
                found["attn"][(int(n), name)] = {
                    "ms": parse_number(r[ms_i]) if ms_i is not None else None,
                    "peak_gb": parse_number(r[gb_i]) if gb_i is not None else None}
    return found


# ===================================================================== reports


def _f(x, digits=3):
    """A number for a table: 3 significant digits, blank for None."""
    if x is None:
        return ""
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:.0f}"


def _vs(measured, predicted):
    """'71.2 (1.1x)': measured, and measured / predicted when both exist."""
    if measured is None:
        return ""
    if predicted:
        return f"{_f(measured)} ({measured / predicted:.2g}x)"
    return _f(measured)


def measure_markdown(attn, softmax, ceil, backends, tiles, errors, predictions_path,
                     bhd=(1, 32, 128)) -> str:
    B, H, D = bhd
    dev = ceil.get("device", {})
    lines = [f"# Measure: {dev.get('name', '?')}", ""]
    if ceil.get("synthetic"):
        lines += ["**SYNTHETIC numbers from `--dry-run` (a counting model of a GB10), not "
                  "measurements.**", ""]
    spec = ceil.get("spec_bandwidth_gbs")
    lines += [f"Profile: {ceil.get('profile')}. Ceilings measured in this run: copy "
              f"**{_f(ceil.get('copy_gbs'))} GB/s** (2 x bytes / time, a copy reads and writes), "
              f"fp16 matmul **{_f(ceil.get('matmul_tflops'))} TFLOP/s** (2 n^3 / time)"
              + (f"; spec bandwidth {spec:.0f} GB/s." if spec else "."), ""]
    preds, text = {"attn": {}, "softmax": {}}, None
    path = Path(predictions_path)
    if path.exists():
        text = path.read_text(errors="replace")
        preds = parse_predictions(text)
    filled = sum(v is not None for d in preds.values() for p in d.values() for v in p.values())
    if text is None:
        lines += [f"> No predictions: write them in `{path}` BEFORE you run the benchmark (the "
                  f"lesson: \"write the prediction column before running anything\"), then run "
                  f"`make bench` again.", ""]
    elif filled == 0:
        lines += [f"> `{path}` has no numbers yet: fill in the predicted columns first.", ""]
    else:
        lines += [f"Predictions: `{path}` ({filled} cells). Measured values show "
                  f"(measured / predicted) beside them.", ""]
    for e in errors:
        lines += [f"> **problem:** {e}"]
    if errors:
        lines += [""]

    lines += [f"## Attention: B = {B}, H = {H}, D = {D}, float16, forward", "",
              "TFLOP/s = 4 B H N^2 D / time; peak GB = CUDA memory allocated beyond q, k, v "
              "during one call.", "",
              "| N | impl | predicted ms | measured ms | predicted peak GB | measured peak GB "
              "| TFLOP/s | % of matmul |", "|---|---|---|---|---|---|---|---|"]
    mm = ceil.get("matmul_tflops")
    for r in attn:
        p = preds["attn"].get((r["N"], r["impl"]), {})
        pct = f"{100 * r['tflops'] / mm:.0f}%" if r.get("tflops") and mm else ""
        measured_ms = _vs(r.get("ms"), p.get("ms")) or r.get("note", "out of memory")
        lines.append(f"| {r['N']} | {r['impl']} | {_f(p.get('ms'))} | {measured_ms} | "
                     f"{_f(p.get('peak_gb'))} | {_vs(r.get('peak_gb'), p.get('peak_gb'))} | "
                     f"{_f(r.get('tflops'))} | {pct} |")
    if not attn:
        lines.append("| | no rows: see the problems above | | | | | | |")
    lines += ["", "Plots: [time vs N](attn_time.png), [peak memory vs N](attn_memory.png), "
              "[TFLOP/s vs N](attn_tflops.png).", "",
              "![time](attn_time.png)", "![memory](attn_memory.png)", "![tflops](attn_tflops.png)",
              ""]
    if backends:
        lines += [f"## SDPA backends at N = {backends[0]['N']}", "",
                  "| backend | ms | TFLOP/s |", "|---|---|---|"]
        for b in backends:
            lines.append(f"| {b['backend']} | {_f(b.get('ms')) or 'not available here'} | "
                         f"{_f(b.get('tflops'))} |")
        lines += [""]
    if tiles:
        lines += [f"## flash_fwd tile shapes at N = {tiles[0]['N']} (Break It 5 last)", "",
                  "| BLOCK_M | BLOCK_N | num_warps | num_stages | ms | TFLOP/s | error |",
                  "|---|---|---|---|---|---|---|"]
        for t in tiles:
            err = (t.get("error") or "").replace("|", "/").replace("\n", " ")[:160]
            lines.append(f"| {t['BLOCK_M']} | {t['BLOCK_N']} | {t.get('num_warps') or ''} | "
                         f"{t.get('num_stages') or ''} | {_f(t.get('ms'))} | "
                         f"{_f(t.get('tflops'))} | {err} |")
        lines += [""]

    copy = ceil.get("copy_gbs")
    lines += ["## Softmax: float16 rows", "",
              "GB/s = 2 x rows x cols x 2 bytes / time (one read and one write of the matrix; "
              "the eager version moves more, and is charged the same bytes).", "",
              "| shape | impl | predicted GB/s | measured GB/s | % of copy | ms |",
              "|---|---|---|---|---|---|"]
    for r in softmax:
        p = preds["softmax"].get((r["rows"], r["cols"], r["impl"]), {})
        pct = f"{100 * r['gbs'] / copy:.0f}%" if r.get("gbs") and copy else ""
        got = _vs(r.get("gbs"), p.get("gbs")) or (r.get("error") or "")[:120]
        lines.append(f"| {r['rows']} x {r['cols']} | {r['impl']} | {_f(p.get('gbs'))} | {got} "
                     f"| {pct} | {_f(r.get('ms'))} |")
    lines += ["", "![softmax](softmax_gbs.png)", ""]
    return "\n".join(lines)


def _series(rows, impl, key):
    pts = [(r["N"], r[key]) for r in rows if r["impl"] == impl and r.get(key)]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_all(out: Path, attn, softmax, ceil, bhd=(1, 32, 128)) -> list[Path]:
    """Four PNGs with matplotlib's Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    B, H, D = bhd
    paths = []

    def figure(name, title, xlabel, ylabel, draw):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        if not draw(ax):
            ax.text(0.5, 0.5, "no measurements", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ns = sorted({r["N"] for r in attn})
        if name.startswith("attn") and ns:             # N ticks as 512, 1K, ... 16K
            ax.set_xticks(ns, [f"{n // 1024}K" if n >= 1024 else str(n) for n in ns])
            ax.minorticks_off()
        if name in ("attn_tflops.png", "softmax_gbs.png"):
            ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)

    def impl_lines(ax, key: str, plot) -> bool:
        """One line per attention impl of column `key`; whether anything was drawn."""
        drawn = False
        for impl in IMPLS:
            xs, ys = _series(attn, impl, key)
            if xs:
                plot(ax, xs, ys, impl)
                drawn = True
        return drawn

    def loglog(ax, xs, ys, impl):
        ax.loglog(xs, ys, "o-", label=impl, base=2)

    def time_plot(ax):
        drawn = impl_lines(ax, "ms", loglog)
        anchor = next((p for impl in ("sdpa", "mine", "naive")
                       for p in reversed(list(zip(*_series(attn, impl, "ms"))))), None)
        if anchor:
            ns = sorted({r["N"] for r in attn})
            c = anchor[1] / anchor[0] ** 2
            ax.loglog(ns, [c * n * n for n in ns], "--", color="gray", base=2,
                      label="guide: time ∝ N²")
        return drawn

    def memory_plot(ax):
        drawn = impl_lines(ax, "peak_gb", loglog)
        ns = sorted({r["N"] for r in attn})
        if ns:
            ax.loglog(ns, [2 * B * H * n * n * 2 / 1e9 for n in ns], ":", color="gray", base=2,
                      label=f"S and P: 2·B·H·N²·2 bytes")
        return drawn

    def tflops_plot(ax):
        drawn = impl_lines(ax, "tflops",
                           lambda ax, xs, ys, impl: ax.semilogx(xs, ys, "o-", label=impl, base=2))
        if ceil.get("matmul_tflops"):
            ax.axhline(ceil["matmul_tflops"], color="gray", ls="--",
                       label=f"fp16 matmul, measured: {ceil['matmul_tflops']:.0f}")
        return drawn

    def softmax_plot(ax):
        drawn = False
        for impl in SOFTMAX_IMPLS:
            pts = sorted((r["bytes"] / 1e6, r["gbs"]) for r in softmax
                         if r["impl"] == impl and r.get("gbs"))
            if pts:
                ax.semilogx(*zip(*pts), "o-", label=impl)
                drawn = True
        if ceil.get("copy_gbs"):
            ax.axhline(ceil["copy_gbs"], color="gray", ls="--",
                       label=f"device copy, measured: {ceil['copy_gbs']:.0f}")
        if ceil.get("spec_bandwidth_gbs"):
            ax.axhline(ceil["spec_bandwidth_gbs"], color="gray", ls=":",
                       label=f"spec sheet: {ceil['spec_bandwidth_gbs']:.0f}")
        return drawn

    where = f"B={B}, H={H}, D={D}, fp16 — {ceil.get('device', {}).get('name', '')}"
    figure("attn_time.png", f"Attention time vs N ({where})", "N", "ms (median)", time_plot)
    figure("attn_memory.png", f"Peak extra memory vs N ({where})", "N", "GB", memory_plot)
    figure("attn_tflops.png", f"Attention TFLOP/s = 4·B·H·N²·D / time ({where})", "N",
           "TFLOP/s", tflops_plot)
    figure("softmax_gbs.png", "Softmax GB/s = 2·rows·cols·2 B / time (fp16)",
           "MB moved (read + write)", "GB/s", softmax_plot)
    return paths


def plot_decode(out: Path, decode, ceil) -> Path:
    """decode_gbs.png: flash_decode's K and V GB/s against L, one line per Hkv, and the copy
    bandwidth measured in this run (issue 13)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    drawn = False
    for hkv in sorted({r["Hkv"] for r in decode}):
        pts = sorted((r["L"], r["gbs"]) for r in decode if r["Hkv"] == hkv and r.get("gbs"))
        if pts:
            ax.semilogx(*zip(*pts), "o-", base=2, label=f"flash_decode, Hkv={hkv}")
            drawn = True
    if ceil.get("copy_gbs"):
        ax.axhline(ceil["copy_gbs"], color="gray", ls="--",
                   label=f"device copy, measured: {ceil['copy_gbs']:.0f}")
        ax.axhline(0.6 * ceil["copy_gbs"], color="gray", ls=":", label="0.6 of copy (full marks)")
    if not drawn:
        ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
    r0 = decode[0] if decode else {}
    ax.set_title(f"Decode GB/s = 2·B·Hkv·L·D·2 B / time (B={r0.get('B')}, Hq={r0.get('Hq')}, "
                 f"D={r0.get('D')}, fp16)", fontsize=10)
    ax.set_xlabel("L (keys per sequence)")
    ax.set_ylabel("GB/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "decode_gbs.png", dpi=110)
    plt.close(fig)
    return out / "decode_gbs.png"


def backward_markdown(rows) -> str:
    """measure.md's flash_backward section: forward and backward, mine against SDPA's fastest
    backend, per N and causal; "" when nothing was measured."""
    if not rows:
        return ""
    by = {(r["N"], r["causal"], r["impl"], r["pass"]): r for r in rows}
    B, H, D = (rows[0].get(x, "?") for x in ("B", "H", "D"))
    lines = ["", "## flash_backward: forward and backward against SDPA (extension track)", "",
             f"B = {B}, H = {H}, D = {D}, float16. Forward FLOPs "
             "4 B H N^2 D, halved when causal; backward FLOPs 2.5x the forward. SDPA: the fastest "
             "backend at each N (its backward: torch.autograd.grad on a kept graph). Issue 12's "
             "targets: forward >= 0.9 of SDPA, backward >= 0.6.", "",
             "| N | causal | pass | mine ms | mine TFLOP/s | SDPA ms | SDPA TFLOP/s | SDPA backend "
             "| mine / SDPA (TFLOP/s) |", "|---|---|---|---|---|---|---|---|---|"]
    for N, causal, p in sorted({(r["N"], r["causal"], r["pass"]) for r in rows},
                               key=lambda x: (x[0], x[1], x[2] != "fwd")):
        m = by.get((N, causal, "mine", p), {})
        t = by.get((N, causal, "sdpa", p), {})
        ratio = (f"{m['tflops'] / t['tflops']:.2f}" if m.get("tflops") and t.get("tflops") else "")
        mine_ms = _f(m.get("ms")) or (m.get("error") or "")[:100].replace("|", "/")
        sdpa_ms = _f(t.get("ms")) or (t.get("error") or "")[:100].replace("|", "/")
        lines.append(f"| {N} | {'yes' if causal else 'no'} | {p} | {mine_ms} | "
                     f"{_f(m.get('tflops'))} | {sdpa_ms} | {_f(t.get('tflops'))} | "
                     f"{t.get('backend') or ''} | {ratio} |")
    lines += ["", "![backward](backward_tflops.png)", ""]
    return "\n".join(lines)


def plot_backward(out: Path, rows, ceil) -> Path:
    """backward_tflops.png: TFLOP/s against N, non-causal and causal side by side; mine and
    SDPA, forward and backward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    ns = sorted({r["N"] for r in rows})
    for ax, causal in zip(axes, (False, True)):
        drawn = False
        for impl, p, style in (("mine", "fwd", "o-"), ("mine", "bwd", "s-"),
                               ("sdpa", "fwd", "o--"), ("sdpa", "bwd", "s--")):
            pts = sorted((r["N"], r["tflops"]) for r in rows if r["impl"] == impl
                         and r["pass"] == p and r["causal"] == causal and r.get("tflops"))
            if pts:
                ax.semilogx(*zip(*pts), style, base=2,
                            label=f"{'flash_' + p if impl == 'mine' else 'SDPA ' + p}")
                drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
        if ceil.get("matmul_tflops"):
            ax.axhline(ceil["matmul_tflops"], color="gray", ls=":",
                       label=f"fp16 matmul, measured: {ceil['matmul_tflops']:.0f}")
        if ns:
            ax.set_xticks(ns, [f"{n // 1024}K" if n >= 1024 else str(n) for n in ns])
            ax.minorticks_off()
        ax.set_title(f"{'causal' if causal else 'non-causal'}", fontsize=10)
        ax.set_xlabel("N")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    axes[0].set_ylabel("TFLOP/s (backward: 2.5x the forward's FLOPs)")
    B, H, D = (rows[0].get(x, "?") for x in ("B", "H", "D")) if rows else ("?",) * 3
    fig.suptitle(f"flash_backward vs SDPA: B={B}, H={H}, D={D}, fp16 — "
                 f"{ceil.get('device', {}).get('name', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "backward_tflops.png", dpi=110)
    plt.close(fig)
    return out / "backward_tflops.png"


def write_outputs(out: Path, attn, softmax, ceil, backends, tiles, errors, predictions_path,
                  bhd=(1, 32, 128), decode=(), backward=()) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if backward:   # extension track: flash_backward's forward and backward TFLOP/s against N
        (out / "backward_bench.json").write_text(json.dumps(list(backward), indent=1, default=str))
        try:
            plot_backward(out, backward, ceil)
        except ImportError:
            pass
    if decode:   # extension track: flash_decode GB/s against L, with the copy ceiling drawn
        (out / "decode_bench.json").write_text(json.dumps(list(decode), indent=1, default=str))
        try:
            plot_decode(out, decode, ceil)
        except ImportError:
            pass
    for name, data in (("attn_bench.json", attn), ("softmax_bench.json", softmax),
                       ("ceilings.json", ceil),
                       ("tiles.json", {"backends": backends, "tiles": tiles})):
        (out / name).write_text(json.dumps(data, indent=1, default=str))
    try:
        plot_all(out, attn, softmax, ceil, bhd)
    except ImportError:
        print("bench: matplotlib is not installed: no plots (pip install matplotlib)")
    (out / "measure.md").write_text(measure_markdown(attn, softmax, ceil, backends, tiles,
                                                     errors, predictions_path, bhd)
                                    + backward_markdown(backward))


# ===================================================================== synthetic numbers


def synthetic():
    """A counting model of a GB10, for --dry-run and the tests: (attn, softmax, ceil, ...)."""
    B, H, D = 1, 32, 128
    bw, tf = 273e9 * 0.8, 100e12
    attn = []
    for N in SIZES["full"]["ns"]:
        flops = 4 * B * H * N * N * D
        out_gb = B * H * N * D * 2 / 1e9
        naive_ms = max(4 * B * H * N * N * 2 / bw, flops / tf) * 1e3 * 1.2
        for impl, ms, peak in (("naive", naive_ms, 2 * B * H * N * N * 2 / 1e9 + out_gb),
                               ("sdpa", flops / 88e12 * 1e3 + 0.02, out_gb * 1.01),
                               ("mine", flops / 40e12 * 1e3 + 0.03, out_gb)):
            if impl == "naive" and N == 16384:
                attn.append(dict(N=N, impl=impl, ms=None, tflops=None, peak_gb=None,
                                 note="not run: needs ~34.6 GB, over the 30.0 GB budget"))
                continue
            attn.append(dict(N=N, impl=impl, ms=ms, tflops=flops / ms / 1e9, peak_gb=peak))
    softmax = []
    for rows, cols in SIZES["full"]["softmax"]:
        nbytes = 2 * rows * cols * 2
        for impl, gbs in (("softmax", 230.0), ("softmax_eager", 52.0), ("torch.softmax", 190.0)):
            softmax.append(dict(rows=rows, cols=cols, impl=impl, bytes=nbytes,
                                ms=nbytes / gbs / 1e6, gbs=gbs, error=None))
    ceil = dict(device={"name": "GB10 (synthetic)"}, profile=devices.GB10.name,
                spec_bandwidth_gbs=273.0, copy_gbs=240.0, matmul_tflops=105.0, synthetic=True)
    backends = [dict(N=4096, backend="CUDNN_ATTENTION", ms=None, tflops=None),
                dict(N=4096, backend="FLASH_ATTENTION", ms=3.1, tflops=88.7)]
    tiles = [dict(N=4096, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, ms=6.0,
                  tflops=45.8, error=None),
             dict(N=4096, BLOCK_M=256, BLOCK_N=256, num_warps=8, num_stages=3, ms=None,
                  tflops=None, error="OutOfResources: out of resources: shared memory, "
                                     "Required: 327680, Hardware limit: 101376")]
    return attn, softmax, ceil, backends, tiles


def synthetic_backward() -> list[dict]:
    """Made-up flash_backward rows for --dry-run and the tests (a counting model, not data)."""
    rows = []
    for N in SIZES["full"]["bwd_ns"]:
        for causal in (False, True):
            for impl, p, tflops in (("mine", "fwd", 40.0), ("mine", "bwd", 26.0),   # a GB10's
                                    ("sdpa", "fwd", 88.0), ("sdpa", "bwd", 60.0)):
                eff = tflops * (0.85 if causal else 1.0) * min(1.0, N / 4096) ** 0.3
                ms = attention_flops(1, 32, N, 128, causal, p == "bwd") / eff / 1e9
                rows.append(dict(N=N, B=1, H=32, D=128, causal=causal, impl=impl, ms=ms, tflops=eff,
                                 backend="FLASH_ATTENTION" if impl == "sdpa" else None,
                                 error=None, **{"pass": p}))
    return rows


# ===================================================================== command line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--submission", default="exercises", help="folder with bench_attn.py, "
                    "flash_triton.py, softmax_triton.py and predictions.md")
    ap.add_argument("--out", default="reports/bench", help="where the report goes")
    ap.add_argument("--quick", action="store_true", help="N up to 4096, one softmax shape")
    ap.add_argument("--dry-run", action="store_true",
                    help="render the report from synthetic numbers (no GPU, no student code)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: test the tool itself with tiny sizes under TRITON_INTERPRET=1")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds for the student's runs")
    ap.add_argument("--only", default="all", choices=["all", "backward"],
                    help="backward: only flash_backward's forward and backward rows (and the "
                         "ceilings)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.dry_run:
        attn, softmax, ceil, backends, tiles = synthetic()
        write_outputs(out, attn, softmax, ceil, backends, tiles, [],
                      Path(args.submission) / "predictions.md", backward=synthetic_backward())
        print(f"bench: synthetic report (--dry-run) in {out}/measure.md")
        return 0
    if args.device == "cuda":
        try:
            import torch

            has_gpu = torch.cuda.is_available() and os.environ.get("GRADER_NO_CUDA") != "1"
        except ImportError:
            has_gpu = False
        if not has_gpu:
            print(NO_GPU)
            return 0
    if not Path(args.submission).is_dir():
        print(f"bench: no such folder {args.submission}", file=sys.stderr)
        return 2
    return measure(args, out)


if __name__ == "__main__":
    sys.exit(main())
