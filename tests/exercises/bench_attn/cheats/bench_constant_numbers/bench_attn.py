"""Cheat (issue 53, "a benchmark's numbers are its answer"): every number is made up, yet
every call a measurement would make is made, in order, with padding after each so that the
interval a timer could have measured is as wide as the made-up number needs.

The timers make their warm-up and timed calls (synchronised where time_proper synchronises) and
sleep after each one, then return constants in the lesson's order, each the top of the range
the grader's public code draws from (so no drawn work is longer): a cold call 120 ms (the
compile), a warm call 0.5 ms (a launch), time_proper 50 ms. probe_backends forces each backend
and calls sdpa 25 times under it, then returns a hard-coded dict (the CPU's answer: FLASH and
MATH run at 3 ms, the CUDA-only ones do not). run_sweep calls each impl 26 times per N
(time_proper's 25 and peak_bytes' one), padded, and gives every row 3 ms. Before: the grader
bounded each number by the widest interval a timer around the calls could have measured, which
the padding widens: every number fell inside, and the cheat kept all 15 points of the CPU
layers. Now each number must follow the work the grader's clock saw, idle time left out, on
draws spread too far apart for any one number.
"""
import json
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
    """Peak CUDA memory that fn(*args) allocates beyond what was already allocated (honest: the
    sweep never passes it the impl, so it measures nothing anyway)."""
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn(*args)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


PAD_S = 0.06   # idle time after each call: any constant up to this many ms fits the interval


def time_once_no_sync(fn, *args) -> float:
    """Break It 4a, made up: the one cold call is made, then a pause, then "the compile"."""
    fn(*args)
    time.sleep(0.15)
    return 120.0


def time_warm_no_sync(fn, *args, warmup=5) -> float:
    """Break It 4b, made up: the warm-up and the one call are made, then "a launch"."""
    for _ in range(warmup):
        fn(*args)
    fn(*args)
    time.sleep(PAD_S)
    return 0.5


def _calls(fn, args, warmup, rep, sync):
    for _ in range(warmup):
        fn(*args)
    for _ in range(rep):
        sync()
        fn(*args)
        sync()
        time.sleep(PAD_S)


def time_proper(fn, *args, warmup=5, rep=20, sync=None) -> float:
    """Break It 4c, made up: every warm-up and timed call is made, synchronised, then 50 ms."""
    if sync is None:
        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    _calls(fn, args, warmup, rep, sync)
    return 50.0


PROBE = {"FLASH_ATTENTION": 3.0, "EFFICIENT_ATTENTION": None, "CUDNN_ATTENTION": None,
         "MATH": 3.0}


def probe_backends(q, k, v) -> dict:
    """Each backend forced and sdpa called 25 times under it, padded; the answer hard-coded."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for backend in [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                    SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]:
        try:
            with sdpa_kernel(backend):
                for _ in range(25):
                    sdpa(q, k, v)
                    time.sleep(PAD_S / 20)
        except RuntimeError:
            pass
    return dict(PROBE)


PLAUSIBLE_MS = {"naive": 3.0, "sdpa": 3.0, "mine": 3.0}


def _none_row(N, name):
    return dict(N=N, impl=name, ms=None, tflops=None, peak_gb=None)


def run_sweep(Ns=NS, B=1, H=32, D=128, dtype=torch.float16, device="cuda", impls=None,
              out_path="attn_bench.json") -> list[dict]:
    """Every impl called as a sweep would call it, each row's ms a constant of its name."""
    if impls is None:
        from flash_triton import flash_fwd

        impls = {"naive": naive, "sdpa": sdpa, "mine": flash_fwd}
    rows = []
    for N in Ns:
        flops = 4 * B * H * N * N * D
        q, k, v = (torch.randn(B, H, N, D, device=device, dtype=dtype) for _ in range(3))
        for name, fn in impls.items():
            try:
                for _ in range(26):
                    fn(q, k, v)
                    time.sleep(PAD_S / 20)
                mem = peak_bytes(lambda *a: None)
            except torch.OutOfMemoryError:
                rows.append(_none_row(N, name))
                continue
            ms = PLAUSIBLE_MS.get(name, 3.0)
            rows.append(dict(N=N, impl=name, ms=ms, tflops=flops / ms / 1e9,
                             peak_gb=None if mem is None else mem / 1e9))
    if out_path is not None:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)
    return rows
