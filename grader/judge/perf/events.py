"""CUDA-event timing of trusted code, as triton.testing.do_bench does it (L2 flushed between
calls, the median of many): the device's ceilings (grader.judge.machine.ceilings) and `make bench`'s
trusted rows. Student calls are timed on the grader's own clock instead (grader.judge.perf.timing).
"""

from __future__ import annotations

import statistics
import time

MiB = 1 << 20


def torch_or_default(torch):
    """`torch`, or the real module when None (tests pass a fake)."""
    if torch is None:
        import torch as _t

        return _t
    return torch


def _l2_bytes(torch, device) -> int:
    try:
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    except Exception:   # a fake torch in tests, or an old torch without the property
        return 0


def flush_bytes(torch=None, device="cuda") -> int:
    """Size of the buffer zeroed before each timed call: 4x the L2, at least 64 MiB.

    triton.testing.do_bench zeroes a fixed 256 MiB (Triton 3.2+); sizing from the L2 keeps it
    big enough on an H200 (60 MiB L2 -> 240 MiB) and cheaper on a GB10 (24 MB -> 96 MiB).
    """
    return max(4 * _l2_bytes(torch_or_default(torch), device), 64 * MiB)


def time_cuda(fn, warmup: int = 10, rep: int = 50, flush_l2: bool = True, torch=None,
              device="cuda", max_total_ms: float = 3000.0) -> float:
    """Median milliseconds of fn(), timed with CUDA events, like triton.testing.do_bench.

    One call and `warmup` more first (compilation, cuBLAS heuristics, the caching allocator),
    the warm-up timed on the host to size `rep`. Then `rep` calls, each between two events on
    the current stream; before each, an L2-sized buffer is zeroed (outside the events) so inputs
    come from main memory, not from L2. One synchronize at the end; the median is robust to a
    stray slow call. Work on another stream is not seen: use this for PyTorch baselines, not to
    time untrusted code.

    Args:
        fn: a callable with no arguments (close over the inputs).
        warmup, rep: call counts (after the first call). rep shrinks (to at least 5) when rep
            calls would take longer than max_total_ms, judged from the warm-up.
        flush_l2: zero the flush buffer before each timed call.
        torch: the torch module (default: import it).
        device: "cuda" (or an index); "cpu" times with the host clock and flushes nothing.
    Returns:
        float milliseconds.
    """
    torch = torch_or_default(torch)
    if str(device) == "cpu":
        return _time_host(fn, warmup, rep, max_total_ms)
    cache = None
    if flush_l2:
        cache = torch.empty(flush_bytes(torch, device) // 4, dtype=torch.int32, device=device)
    fn()                                  # the first call may compile: not used to size rep
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) * 1e3 / max(warmup, 1)
    rep = _fit_rep(rep, per_call, max_total_ms)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(rep)]
    for start, end in zip(starts, ends):
        if cache is not None:
            cache.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _fit_rep(rep: int, per_call: float, max_total_ms: float) -> int:
    if per_call * rep > max_total_ms:
        return max(5, int(max_total_ms / max(per_call, 1e-6)))
    return rep


def _time_host(fn, warmup, rep, max_total_ms) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        fn()
    rep = _fit_rep(rep, (time.perf_counter() - t0) * 1e3 / max(warmup, 1), max_total_ms)
    times = []
    for _ in range(rep):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
