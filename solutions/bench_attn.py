# BEGIN SOLUTION
"""Benchmark attention without lying to yourself: naive vs SDPA vs your Triton kernel (reference).

Lesson sections "Benchmarking a kernel without lying to yourself", Build It's bench_attn.py, and
Break It 4 ("Lie with a benchmark"). Three timers, from wrong to right:

    time_once_no_sync  one call, no warm-up, no synchronize: measures compilation and queueing
    time_warm_no_sync  warm-up, then one call, no synchronize: measures launch overhead only
    time_proper        warm-up, synchronize around every timed call, median of many: the real time

then probe_backends (which SDPA backends run here, and how fast) and run_sweep (the Measure table:
ms, TFLOP/s and peak memory against N, one JSON row per (N, impl)). `ms` comes from time_proper,
which works on CPU and GPU, where the lesson used triton.testing.do_bench (which also flushes L2).

    FLOPs = 4 * B * H * N^2 * D   (2 N^2 D for Q K^T, 2 N^2 D for P V, per head; forward only)

Run (needs a CUDA GPU, triton, and flash_triton.py next to this file):
    python solutions/bench_attn.py              # writes attn_bench.json, prints the table
    make check EX=bench_attn                    # the grader's checks for this exercise
"""
# END SOLUTION
# BEGIN STUB
# """Benchmark attention without lying to yourself: naive vs SDPA vs your Triton kernel.
#
# Lesson sections "Benchmarking a kernel without lying to yourself", Build It's bench_attn.py, and
# Break It 4 ("Lie with a benchmark"). Three timers, from wrong to right:
#
#     time_once_no_sync  one call, no warm-up, no synchronize: measures compilation and queueing
#     time_warm_no_sync  warm-up, then one call, no synchronize: measures launch overhead only
#     time_proper        warm-up, synchronize around every timed call, median of many: the real time
#
# then probe_backends (which SDPA backends run here, and how fast), and the lesson's Measure loop:
# peak_bytes and run_sweep (ms, TFLOP/s and peak memory against N, one JSON row per (N, impl)).
# Write those six; naive and sdpa are given. The lesson's loop times with triton.testing.do_bench
# (which also flushes L2); here run_sweep takes `ms` from your time_proper, which works on CPU and GPU.
#
#     FLOPs = 4 * B * H * N^2 * D   (2 N^2 D for Q K^T, 2 N^2 D for P V, per head; forward only)
#
# Run (needs a CUDA GPU, triton, and flash_triton.py next to this file):
#     python exercises/bench_attn.py              # writes attn_bench.json, prints the table
#     make check EX=bench_attn                    # the grader's checks for this exercise
# """
# END STUB
import json
import statistics
import time

import torch
import torch.nn.functional as F

NS = [512, 1024, 2048, 4096, 8192, 16384]


def naive(q, k, v):
    """Eager attention: S and P, each (B, H, N, N), go through memory.

    Args:
        q, k, v: (B, H, N, D) float16 (or float32), same device.
    Returns:
        (B, H, N, D) same dtype.
    """
    s = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    return torch.softmax(s, dim=-1) @ v


def sdpa(q, k, v):
    """PyTorch's fused attention; it picks a backend (cuDNN, flash, mem-efficient or math).

    Args:
        q, k, v: (B, H, N, D) float16 (or float32), same device.
    Returns:
        (B, H, N, D) same dtype.
    """
    return F.scaled_dot_product_attention(q, k, v)


def peak_bytes(fn, *args):
    """Peak CUDA memory that fn(*args) allocates beyond what was already allocated.

    Args:
        fn: the function to measure; args: its arguments (CUDA tensors).
    Returns:
        int bytes, or None when CUDA is not available (there is no allocator to ask).
    """
    # BEGIN SOLUTION
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn(*args)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base
    # END SOLUTION
    # BEGIN STUB
    # # TODO(bench_attn): roughly 7 lines, as in the lesson's bench_attn.py.
    # #   Without CUDA return None. Otherwise: synchronize, reset the peak statistics, read
    # #   memory_allocated() as the base, call fn(*args), synchronize, and return
    # #   max_memory_allocated() - base.
    # raise NotImplementedError("TODO(bench_attn): peak_bytes - reset the peak stats, run fn, max_memory_allocated() minus the base")
    # END STUB


# BEGIN SOLUTION
def time_once_no_sync(fn, *args) -> float:
    """Break It 4a, the first lie: one cold call, host clock, no synchronize.

    On a GPU this includes Triton's compilation (hundreds of ms or more) on the first call, and
    otherwise stops the clock when the work is queued, not when it is done.

    Args:
        fn: the function to time; args: its arguments.
    Returns:
        float milliseconds of that one call.
    """
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def time_warm_no_sync(fn, *args, warmup=5) -> float:
    """Break It 4b, the second lie: warm up, then one call, still no synchronize.

    Compilation is gone, but a launch returns as soon as the kernel is queued, so on a GPU this is
    launch overhead (a few microseconds), absurdly fast next to the hardware's real limits.

    Args:
        fn: the function to time; args: its arguments.
        warmup: untimed calls first.
    Returns:
        float milliseconds of one call after warm-up.
    """
    for _ in range(warmup):
        fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def time_proper(fn, *args, warmup=5, rep=20, sync=None) -> float:
    """Break It 4c, the truth: warm up, then `rep` timed calls, each finished before the clock
    stops; return the median.

    Unlike triton.testing.do_bench this does not flush L2 between calls, so small inputs may be
    timed from cache.

    Args:
        fn: the function to time; args: its arguments.
        warmup: untimed calls first (compilation, autotuning, allocator warm-up).
        rep: timed calls.
        sync: waits for queued device work; default torch.cuda.synchronize when CUDA is available,
            else nothing (CPU calls finish before they return).
    Returns:
        float milliseconds, the median of the `rep` calls (robust to a stray slow call).
    """
    if sync is None:
        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(rep):
        sync()                                # start from an idle device: nothing queued earlier
        t0 = time.perf_counter()
        fn(*args)
        sync()                                # stop the clock when the work is done, not queued
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)

# END SOLUTION
# BEGIN STUB
# def time_once_no_sync(fn, *args) -> float:
#     """Break It 4a, the first lie: one cold call, host clock, no synchronize.
#
#     On a GPU this includes Triton's compilation (hundreds of ms or more) on the first call, and
#     otherwise stops the clock when the work is queued, not when it is done.
#
#     Args:
#         fn: the function to time; args: its arguments.
#     Returns:
#         float milliseconds of that one call.
#     """
#     # TODO(bench_attn): roughly 3 lines. Break It 4a.
#     #   Read time.perf_counter(), call fn(*args) once, return the elapsed milliseconds.
#     #   No warm-up and no synchronize, on purpose: write this number down next to the other two.
#     raise NotImplementedError("TODO(bench_attn): time_once_no_sync - perf_counter around one cold call, no sync, return ms")
#
#
# def time_warm_no_sync(fn, *args, warmup=5) -> float:
#     """Break It 4b, the second lie: warm up, then one call, still no synchronize.
#
#     Compilation is gone, but a launch returns as soon as the kernel is queued, so on a GPU this is
#     launch overhead (a few microseconds), absurdly fast next to the hardware's real limits.
#
#     Args:
#         fn: the function to time; args: its arguments.
#         warmup: untimed calls first.
#     Returns:
#         float milliseconds of one call after warm-up.
#     """
#     # TODO(bench_attn): roughly 5 lines. Break It 4b.
#     #   Call fn(*args) `warmup` times untimed, then time ONE call with time.perf_counter and
#     #   return milliseconds. Still no synchronize: see how fast "queued" looks.
#     raise NotImplementedError("TODO(bench_attn): time_warm_no_sync - warm-up calls, then perf_counter around one call, no sync, return ms")
#
#
# def time_proper(fn, *args, warmup=5, rep=20, sync=None) -> float:
#     """Break It 4c, the truth: warm up, then `rep` timed calls, each finished before the clock
#     stops; return the median.
#
#     Unlike triton.testing.do_bench this does not flush L2 between calls, so small inputs may be
#     timed from cache.
#
#     Args:
#         fn: the function to time; args: its arguments.
#         warmup: untimed calls first (compilation, autotuning, allocator warm-up).
#         rep: timed calls.
#         sync: waits for queued device work; default torch.cuda.synchronize when CUDA is available,
#             else nothing (CPU calls finish before they return).
#     Returns:
#         float milliseconds, the median of the `rep` calls (robust to a stray slow call).
#     """
#     # TODO(bench_attn): roughly 11 lines. Break It 4c, and rules 1-3 of "Benchmarking a kernel
#     # without lying to yourself".
#     #   sync defaults to torch.cuda.synchronize if torch.cuda.is_available(), else a no-op.
#     #   Call fn(*args) `warmup` times untimed. Then `rep` times:
#     #       sync(); start the clock; fn(*args); sync(); stop the clock
#     #   (sync before starting, so earlier queued work is not billed to this call; sync inside
#     #   the timed region, so the clock stops when the work is done, not when it is queued).
#     #   Return the median in milliseconds (statistics.median).
#     raise NotImplementedError("TODO(bench_attn): time_proper - warm-up, then rep timed calls with sync() before and after each, median ms")
# END STUB


def probe_backends(q, k, v) -> dict:
    """Which SDPA backends run on these inputs, and how fast.

    Each backend is forced with sdpa_kernel; one that cannot take these inputs (wrong device,
    dtype, head size, or not built) raises RuntimeError and is recorded as None.

    Args:
        q, k, v: (B, H, N, D) tensors on any device.
    Returns:
        {"FLASH_ATTENTION": ms or None, "EFFICIENT_ATTENTION": ..., "CUDNN_ATTENTION": ...,
         "MATH": ...}, ms from time_proper.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # BEGIN SOLUTION
    results = {}
    for backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]:
        try:
            with sdpa_kernel(backend):
                results[backend.name] = time_proper(sdpa, q, k, v)
        except RuntimeError:                  # not available here (OutOfMemoryError is one too)
            results[backend.name] = None
    return results
    # END SOLUTION
    # BEGIN STUB
    # # TODO(bench_attn): roughly 7 lines.
    # #   For each backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
    # #   SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]:
    # #       with sdpa_kernel(backend): time sdpa(q, k, v) with time_proper
    # #       a backend that cannot run these inputs raises RuntimeError: record None, go on
    # #   Return {backend.name: ms or None}. It must never crash, on CPU tensors too.
    # raise NotImplementedError("TODO(bench_attn): probe_backends - time sdpa under each sdpa_kernel(backend), None on RuntimeError")
    # END STUB


def _free_memory():
    """Hand cached blocks back after an out-of-memory error, so the next run starts clean."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _none_row(N, name):
    """The row for a run that ran out of memory."""
    return dict(N=N, impl=name, ms=None, tflops=None, peak_gb=None)


def run_sweep(Ns=NS, B=1, H=32, D=128, dtype=torch.float16, device="cuda", impls=None,
              out_path="attn_bench.json") -> list[dict]:
    """The Measure table: time and peak memory of each implementation at each N.

    Args:
        Ns: sequence lengths to run.
        B, H, D: batch, heads, head size; q, k, v are (B, H, N, D) standard normal.
        dtype, device: of q, k, v.
        impls: {name: fn(q, k, v) -> (B, H, N, D)}; default naive, sdpa and "mine" = flash_fwd.
            If "mine" is present it must match sdpa (atol = rtol = 2e-2) before anything is timed.
        out_path: where to write the rows as JSON; None writes nothing.
    Returns:
        list of dict(N, impl, ms, tflops, peak_gb), one per (N, impl) in order. ms, tflops and
        peak_gb are None for a run that ran out of memory; peak_gb is None without CUDA.
    """
    # BEGIN SOLUTION
    if impls is None:
        from flash_triton import flash_fwd    # here, not at the top: it needs triton

        impls = {"naive": naive, "sdpa": sdpa, "mine": flash_fwd}
    rows = []
    for N in Ns:
        flops = 4 * B * H * N * N * D
        # Inputs and the reference first. Memory is freed outside the except clauses: while an
        # exception is being handled, its traceback still holds the tensors of the failed call.
        q = k = v = ref = None
        oom = False
        try:
            q, k, v = (torch.randn(B, H, N, D, device=device, dtype=dtype) for _ in range(3))
            if "mine" in impls:
                ref = sdpa(q, k, v)
        except torch.OutOfMemoryError:
            oom = True
        if oom:
            q = k = v = ref = None
            _free_memory()
            for name in impls:
                rows.append(_none_row(N, name))
                print(rows[-1])
            continue

        # Correctness before speed: a wrong kernel can be extremely fast. A failed check raises;
        # "mine" running out of memory here only gives "mine" its None row.
        mine_oom = False
        if ref is not None:
            out = None
            try:
                out = impls["mine"](q, k, v)
            except torch.OutOfMemoryError:
                mine_oom = True
            else:
                torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
            out = ref = None
            if mine_oom:
                _free_memory()

        for name, fn in impls.items():
            oom = mine_oom and name == "mine"
            if not oom:
                try:
                    ms = time_proper(lambda: fn(q, k, v))
                    mem = peak_bytes(fn, q, k, v)
                except torch.OutOfMemoryError:
                    oom = True
            if oom:
                _free_memory()
                rows.append(_none_row(N, name))
            else:
                rows.append(dict(N=N, impl=name, ms=ms, tflops=flops / ms / 1e9,
                                 peak_gb=None if mem is None else mem / 1e9))
            print(rows[-1])
        q = k = v = None
    if out_path is not None:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)
    return rows

    # END SOLUTION
    # BEGIN STUB
    # # TODO(bench_attn): roughly 35 lines: the lesson's Measure loop, made robust.
    # #   impls defaults to {"naive": naive, "sdpa": sdpa, "mine": flash_fwd} (import flash_fwd
    # #   inside the function: it needs triton). For each N:
    # #     - q, k, v = torch.randn(B, H, N, D, device=device, dtype=dtype), three times;
    # #     - if "mine" is in impls: check it against sdpa first (torch.testing.assert_close,
    # #       atol = rtol = 2e-2): a wrong kernel can be extremely fast;
    # #     - for each impl: ms = time_proper(lambda: fn(q, k, v)), mem = peak_bytes(fn, q, k, v),
    # #       flops = 4 * B * H * N**2 * D, row = dict(N=N, impl=name, ms=ms,
    # #       tflops=flops / ms / 1e9, peak_gb=None if mem is None else mem / 1e9);
    # #     - torch.OutOfMemoryError in any step of one impl: its row is _none_row(N, name), call
    # #       _free_memory() outside the except clause, and go on with the next impl and N.
    # #   Print each row as it is made; write the rows to out_path as JSON (unless None); return them.
    # raise NotImplementedError("TODO(bench_attn): run_sweep - per N: inputs, check mine, time_proper and peak_bytes per impl, OOM -> None row, JSON")
    # END STUB

if __name__ == "__main__":
    from flash_triton import flash_fwd

    B, H, D = 1, 32, 128
    # Break It 4 first, while flash_fwd is still cold: three timings of the same call.
    q, k, v = (torch.randn(B, H, 8192, D, device="cuda", dtype=torch.float16) for _ in range(3))
    print("flash_fwd at N = 8192, three ways:")
    print(f"  one cold call, no sync    {time_once_no_sync(flash_fwd, q, k, v):10.3f} ms")
    print(f"  warm call, no sync        {time_warm_no_sync(flash_fwd, q, k, v):10.3f} ms")
    print(f"  warm, synced, median      {time_proper(flash_fwd, q, k, v):10.3f} ms")
    q = k = v = None

    print(f"\nB={B} H={H} D={D} float16; TFLOP/s = 4*B*H*N^2*D / time; "
          "ms = median of time_proper")
    rows = run_sweep(B=B, H=H, D=D)
    print(f"\n{'N':>6} {'impl':>6} {'ms':>9} {'TFLOP/s':>8} {'peak GB':>8}")
    for r in rows:
        if r["ms"] is None:
            print(f"{r['N']:>6} {r['impl']:>6} {'out of memory':>27}")
        else:
            print(f"{r['N']:>6} {r['impl']:>6} {r['ms']:>9.3f} {r['tflops']:>8.1f} "
                  f"{r['peak_gb']:>8.3f}")

    N = 4096
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    print(f"\nSDPA backends at N = {N} (None: not available for these inputs on this machine)")
    for name, ms in probe_backends(q, k, v).items():
        if ms is None:
            print(f"  {name:<20} not available")
        else:
            print(f"  {name:<20} {ms:.3f} ms, {4 * B * H * N * N * D / ms / 1e9:.1f} TFLOP/s")
