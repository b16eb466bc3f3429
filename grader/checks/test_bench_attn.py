"""Checks for exercises/bench_attn.py (lesson: "Benchmarking a kernel without lying to yourself",
Build It's bench_attn.py, Break It 4 "Lie with a benchmark").

No GPU is needed: the worker runs on CPU tensors. The timers are given a trusted workload
(`grader.sandbox.workloads.AsyncWork`) that behaves like a kernel launch with a known duration: the call
returns at once, the work finishes `ms` later, and the first call pays a compile. What each timer
reports is compared with those known durations, and with the grader's own clock around the call.
Sweeps get trusted implementations (`Attention`, `OutOfMemoryAbove`) and tiny shapes; their rows
are checked against the formula, and against the JSON file the student's code wrote.
"""

from __future__ import annotations

import json
import math
import numbers

import pytest

from grader.sandbox.codec import Trusted
from grader.judge.compare import CheckFailed
from grader.judge.inputs import randn, tensor

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
CUDA_ONLY = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION")   # no CPU kernel in any torch build
ROW_KEYS = ("N", "impl", "ms", "tflops", "peak_gb")
MAX_JSON_BYTES = 1 << 20
FLOAT32 = Trusted("dtype", params={"dtype": "float32"})    # torch.float32, built in the worker


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(float(x))


def _positive_ms(value, what: str) -> float:
    if not _is_number(value) or float(value) <= 0:
        raise CheckFailed(f"{what}: expected a positive, finite number of milliseconds, "
                          f"got {value!r:.80}")
    return float(value)


# ------------------------------------------------------------------------------ backend_probe


@pytest.mark.check("bench_attn.backend_probe")
def test_backend_probe(student, rng):
    sub = student()
    shape = (1, 2, int(rng.integers(17, 100)), 16)             # (B, H, N, D), N awkward
    q, k, v = (tensor(randn(rng, shape, "float32"), "float32") for _ in range(3))
    what = f"probe_backends(q, k, v) on CPU float32 tensors of shape {shape}"
    result = sub.call("probe_backends", q, k, v)
    got = result.value
    if not isinstance(got, dict):
        raise CheckFailed(f"{what}: expected a dict {{backend name: ms or None}}, got "
                          f"{type(got).__name__} {got!r:.80}")
    if set(got) != set(BACKENDS):
        raise CheckFailed(f"{what}: expected exactly the keys {list(BACKENDS)} (SDPBackend.name), "
                          f"got {sorted(got)}")
    wall_ms = result.wall_s * 1e3
    for name in BACKENDS:
        ms = got[name]
        if ms is None:
            continue
        ms = _positive_ms(ms, f"{what}[{name!r}]")
        if ms > wall_ms:
            raise CheckFailed(f"{what}[{name!r}]: reported {ms:.3f} ms, longer than the whole call "
                              f"took on the grader's clock ({wall_ms:.3f} ms)")
    for name in CUDA_ONLY:
        if got[name] is not None:
            raise CheckFailed(f"{what}[{name!r}]: expected None (this backend has no CPU kernel: "
                              f"forced with sdpa_kernel it raises RuntimeError), got {got[name]!r}")
    if got["MATH"] is None:
        raise CheckFailed(f"{what}['MATH']: expected a time in ms (the math backend runs on every "
                          f"device), got None. Is only RuntimeError caught, around each backend?")


# ------------------------------------------------------------------------------ honest_timing


@pytest.mark.check("bench_attn.honest_timing")
def test_honest_timing(student, rng):
    sub = student()
    ms = round(float(rng.uniform(20, 35)), 1)
    first = round(float(rng.uniform(120, 180)), 1)
    params = {"ms": ms, "first_call_ms": first}
    case = (f"fn: a launch that returns at once and whose work finishes {ms} ms later; its first "
            f"call also compiles for {first} ms")

    # 4c: warm up, sync around every timed call, median. A fresh workload per call (markers with
    # one key share one instance within one call): fn and its synchronize.
    warmup, rep = 2, 5
    fn = Trusted("async_work", key="w", params=params)
    sync = Trusted("async_work", key="w", attr="synchronize")
    what = f"time_proper(fn, warmup={warmup}, rep={rep}, sync=fn.synchronize)"
    result = sub.call("time_proper", fn, warmup=warmup, rep=rep, sync=sync)
    got = _positive_ms(result.value, what)
    if abs(got - ms) > 0.25 * ms + 2.0:
        why = ("far below: the clock stopped when the work was queued; call sync() after fn, "
               "before reading the clock" if got < ms else
               "far above: the first call's compile or earlier queued work was billed to the timed "
               "calls; warm up first and sync() before starting the clock")
        raise CheckFailed(f"{what}: expected about {ms} ms ({case}), got {got:.3f} ms ({why})")
    wall_ms = result.wall_s * 1e3
    if wall_ms < rep * got:
        raise CheckFailed(f"{what}: reported a median of {got:.3f} ms over {rep} timed calls, but "
                          f"the whole call took {wall_ms:.1f} ms on the grader's clock (less than "
                          f"{rep} x {got:.3f}); the time must come from {rep} real timed calls")

    # 4a: one cold call, no sync: the compile, not the work
    what = "time_once_no_sync(fn)"
    result = sub.call("time_once_no_sync", Trusted("async_work", params=params))
    got = _positive_ms(result.value, what)
    if got < 0.9 * first:
        raise CheckFailed(f"{what}: expected at least the {first} ms compile of the first call "
                          f"({case}), got {got:.3f} ms. One cold call: no warm-up before the clock")
    if got > result.wall_s * 1e3:
        raise CheckFailed(f"{what}: reported {got:.3f} ms, longer than the whole call took on the "
                          f"grader's clock ({result.wall_s * 1e3:.1f} ms)")

    # 4b: warm, no sync: launch overhead only
    warmup = 3
    what = f"time_warm_no_sync(fn, warmup={warmup})"
    got = sub.time_warm_no_sync(Trusted("async_work", params=params), warmup=warmup)
    if not _is_number(got) or got < 0:
        raise CheckFailed(f"{what}: expected a number of milliseconds >= 0, got {got!r:.80}")
    if got > 0.5 * ms:       # loose: a preempted launch on a busy machine still passes
        why = (f"that includes the {first} ms compile: make the warm-up calls before starting the "
               f"clock" if got >= 0.9 * first else "no sync: only the launch should be timed")
        raise CheckFailed(f"{what}: expected launch overhead only, far below the {ms} ms the work "
                          f"takes ({case}), got {got:.3f} ms ({why})")


# ------------------------------------------------------------------------------ sweeps


def _sweep(sub, what: str, Ns, B, H, D, impls: dict, out_name: str,
           check_file: bool = True) -> tuple[list[dict], float]:
    """Run the student's run_sweep on CPU; return its rows (checked for keys and order) and the
    grader's wall time of the call in ms. `check_file`: the JSON at out_name holds the rows."""
    out = sub.scratch / out_name
    out.unlink(missing_ok=True)
    result = sub.call("run_sweep", Ns=list(Ns), B=B, H=H, D=D, dtype=FLOAT32, device="cpu",
                      impls=impls, out_path=out_name)
    rows = result.value
    expected = [(N, name) for N in Ns for name in impls]
    if not isinstance(rows, list):
        raise CheckFailed(f"{what}: expected a list of row dicts, got {type(rows).__name__} "
                          f"{rows!r:.80}")
    for i, (N, name) in enumerate(expected):
        if i >= len(rows):
            raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl) in order, "
                              f"got {len(rows)}; the row for N={N}, impl={name!r} is missing")
        row = rows[i]
        if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise CheckFailed(f"{what}: row {i} (N={N}, impl={name!r}): expected the keys "
                              f"{list(ROW_KEYS)}, got {keys}")
        if row["N"] != N or row["impl"] != name:
            raise CheckFailed(f"{what}: row {i}: expected N={N}, impl={name!r} (one row per "
                              f"(N, impl), N outer, impls in the given order), got "
                              f"N={row['N']!r}, impl={row['impl']!r}")
    if len(rows) != len(expected):
        raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl), got "
                          f"{len(rows)}")
    if check_file:
        _check_file(out, out_name, rows, what)
    return rows, result.wall_s * 1e3


def _check_file(path, name: str, rows: list[dict], what: str) -> None:
    """The JSON file the student's run_sweep wrote in its working directory holds the rows."""
    if path.is_symlink():   # the trusted side reads only what the worker wrote, never a link
        raise CheckFailed(f"{what}: expected {name} to be a plain file, got a symbolic link")
    if not path.is_file():
        raise CheckFailed(f"{what}: expected the rows written to {name} (out_path) as JSON, "
                          f"found no such file")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckFailed(f"{what}: {name} is {path.stat().st_size} bytes, far more than the rows")
    try:
        saved = json.loads(path.read_text(errors="replace"))
    except json.JSONDecodeError as e:
        raise CheckFailed(f"{what}: {name} is not valid JSON ({e})") from None
    if not isinstance(saved, list) or len(saved) != len(rows):
        count = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise CheckFailed(f"{what}: expected {name} to hold the {len(rows)} returned rows, "
                          f"got {count}")
    for i, (s, r) in enumerate(zip(saved, rows)):
        if not isinstance(s, dict) or set(s) != set(r):
            raise CheckFailed(f"{what}: {name} row {i}: expected the keys {list(ROW_KEYS)}, got "
                              f"{sorted(s) if isinstance(s, dict) else type(s).__name__}")
        for key in ROW_KEYS:
            a, b = s[key], r[key]
            same = a == b or (_is_number(a) and _is_number(b)
                              and math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0))
            if not same:
                raise CheckFailed(f"{what}: {name} row {i} (N={r['N']}, impl={r['impl']!r}): "
                                  f"expected {key} = {b!r} as returned, got {a!r} in the file")


def _check_timed_row(row: dict, B: int, H: int, D: int, what: str, formula: bool = True) -> None:
    """A row of a run that fit: ms measured, tflops a number (from the formula when `formula`:
    sweep_rows grades it, oom_recorded only needs numbers), peak_gb None on CPU."""
    N, name = row["N"], row["impl"]
    where = f"{what}: row N={N}, impl={name!r}"
    ms = _positive_ms(row["ms"], f"{where}, ms")
    flops = 4 * B * H * N * N * D
    tflops = flops / ms / 1e9
    got = row["tflops"]
    if not _is_number(got) or got <= 0:
        raise CheckFailed(f"{where}: expected tflops, a positive number, got {got!r}")
    if formula and not math.isclose(got, tflops, rel_tol=1e-6):
        raise CheckFailed(f"{where}: expected tflops = 4*B*H*N^2*D / ms / 1e9 = {flops} / {ms!r} "
                          f"/ 1e9 = {tflops!r}, got {got!r}")
    peak = row["peak_gb"]
    if peak is not None and not (_is_number(peak) and peak >= 0):
        raise CheckFailed(f"{where}: expected peak_gb None (no CUDA here) or a number >= 0, "
                          f"got {peak!r}")


@pytest.mark.check("bench_attn.sweep_rows")
def test_sweep_rows(student, rng):
    sub = student()
    Ns, B, H, D = [int(rng.integers(9, 33)), int(rng.integers(33, 65))], 1, 2, 16   # tiny, awkward
    # trusted stand-ins (functions cannot cross); no "mine": its check against sdpa costs ~0.6 s
    impls = {name: Trusted("attention") for name in ("naive", "sdpa")}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', "
            f"impls={list(impls)}) [seed {rng.seed}]")
    rows, wall_ms = _sweep(sub, what, Ns, B, H, D, impls, "attn_bench.json")
    for row in rows:
        _check_timed_row(row, B, H, D, what)
    total = sum(row["ms"] for row in rows)
    if total > wall_ms:
        raise CheckFailed(f"{what}: the rows' ms add up to {total:.3f} ms, more than the whole "
                          f"sweep took on the grader's clock ({wall_ms:.1f} ms)")


@pytest.mark.check("bench_attn.oom_recorded")
def test_oom_recorded(student, rng):
    sub = student()
    Ns, B, H, D, limit = [16, 48, 80], 1, 2, 16, 48
    # "big" raises torch.OutOfMemoryError from N = 48 on; the impl after it must still run
    impls = {"sdpa": Trusted("attention"), "big": Trusted("oom_above", params={"n": limit}),
             "after": Trusted("attention")}
    what = (f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float32, device='cpu', impls={list(impls)}), "
            f"where 'big' raises torch.OutOfMemoryError for N >= {limit}")
    # the file is sweep_rows' business: one mistake should cost one check
    rows, _ = _sweep(sub, what, Ns, B, H, D, impls, "attn_bench_oom.json", check_file=False)
    for row in rows:
        if row["impl"] == "big" and row["N"] >= limit:
            for key in ("ms", "tflops", "peak_gb"):
                if row[key] is not None:
                    raise CheckFailed(f"{what}: row N={row['N']}, impl='big' ran out of memory: "
                                      f"expected {key} = None, got {row[key]!r}")
        else:
            _check_timed_row(row, B, H, D, what, formula=False)


# ------------------------------------------------------------------------------------- gpu


@pytest.mark.check("bench_attn.gpu_sweep")
def test_gpu_sweep(student, gpu):
    from grader.judge import ceilings

    sub = student()
    B, H, D = 1, 8, 64
    Ns = [1024, 2048, 4096]
    import torch

    # never allocate what cannot fit (unified memory can stall the whole machine): estimate first
    Ns = [N for N in Ns if ceilings.fits(ceilings.naive_attention_bytes(B, H, N, D, "float16"), torch)]
    if len(Ns) < 2:
        pytest.skip("naive attention at N = 2048 does not fit in this GPU's free memory")
    impls = {name: Trusted("submission_function", params={"module": "bench_attn", "name": name})
             for name in ("naive", "sdpa")}
    rows = sub.call("run_sweep", Ns=Ns, B=B, H=H, D=D,
                    dtype=Trusted("dtype", params={"dtype": "float16"}), device="cuda",
                    impls=impls, out_path="attn_bench.json").value
    what = f"run_sweep(Ns={Ns}, B={B}, H={H}, D={D}, float16, cuda)"
    if not isinstance(rows, list) or len(rows) != 2 * len(Ns):
        raise CheckFailed(f"{what}: expected {2 * len(Ns)} rows (one per N and impl), got {rows!r:.200}")
    peak = {}
    for row in rows:
        _check_timed_row(row, B, H, D, what)
        if not _is_number(row["peak_gb"]) or row["peak_gb"] <= 0:
            raise CheckFailed(f"{what}: row {row}: expected peak_gb > 0 from peak_bytes on CUDA")
        peak[(row["impl"], row["N"])] = float(row["peak_gb"])
    for a, b in zip(Ns, Ns[1:]):
        growth = peak[("naive", b)] / peak[("naive", a)]
        if not 2.5 <= growth <= 5.0:
            raise CheckFailed(f"{what}: naive's peak memory grew {growth:.2f}x from N={a} to N={b}; "
                              f"expected about 4x (S and P are N x N)")
        flat = peak[("sdpa", b)] / peak[("sdpa", a)]
        if flat > 2.5:
            raise CheckFailed(f"{what}: sdpa's peak memory grew {flat:.2f}x from N={a} to N={b}; "
                              f"expected about 2x at most (only the output grows, linearly)")
