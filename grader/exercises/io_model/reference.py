"""io_model's formulas, computed by the grader (never taken from the student), the lesson's worked
numbers, and the random shapes the checks draw. The check modules and the hidden checks import
these.

Every count is per head and exact: Python integers where the count is an integer (the lesson's
"Count the bytes for one head, in elements", then times the bytes per element).
"""

from __future__ import annotations

import math

import numpy as np

# --------------------------------------------------------------------------- the lesson's model


def naive_bytes(N, d, elem_bytes=2):
    """Q, K read (2Nd); S written, read (2N^2); P written, read (2N^2); V read, O written (2Nd)."""
    return (2 * N * d + 2 * N * N + 2 * N * N + 2 * N * d) * elem_bytes


def naive_flops(N, d):
    """2N^2 d for Q K^T and 2N^2 d for P V."""
    return 4 * N * N * d


def naive_intensity(N, d, elem_bytes=2):
    return naive_flops(N, d) / naive_bytes(N, d, elem_bytes)


def query_blocks(N, Br):
    """ceil(N / Br): the last query block may be short; it still reads all of K and V."""
    return (N + Br - 1) // Br


def flash_bytes_worst(N, d, Br, Bc, elem_bytes=2):
    """Q read once (Nd), K and V once per query block (2Nd each block), O written once (Nd).
    Bc does not appear: the inner loop's block size changes how K and V are read, not how often."""
    return (2 * N * d + query_blocks(N, Br) * 2 * N * d) * elem_bytes


def flash_bytes_l2(N, d, elem_bytes=2):
    """Every K/V re-read hits in L2: Q, K, V and O cross HBM once each."""
    return 4 * N * d * elem_bytes


def flash_bytes_sram(N, d, M, elem_bytes=2):
    """The worst case with Br = M / d: 2Nd + 2N^2 d^2 / M elements (Theta(N^2 d^2 / M))."""
    return (2 * N * d + 2 * N * N * d * d / M) * elem_bytes


def sp_bytes(H, N, elem_bytes=2, B=1):
    """S and P, N x N each per head, both alive at once: 2 x B x H x N^2 x elem_bytes."""
    return 2 * B * H * N * N * elem_bytes


def flash_state_bytes(H, N, B=1):
    """Two fp32 numbers per query row (m and l, or L = m + log l)."""
    return 2 * B * H * N * 4


def exp_overflow(dtype):
    """ln of the dtype's largest finite value: e^x passes it there."""
    return math.log(float(np.finfo(np.dtype(dtype)).max))


def ridge_point(peak_flops, bandwidth):
    return peak_flops / bandwidth


def sram_bandwidth(sms, clock_hz, bytes_per_clock=128):
    return sms * bytes_per_clock * clock_hz


def bound(intensity, peak_flops, bandwidth):
    return "memory" if intensity < peak_flops / bandwidth else "compute"


# ------------------------------------------------------------------ the lesson's worked numbers

# {function: [(args, what the lesson says, its rounding, the lesson's words)]}: every argument
# positional, as the checks pass them. A check compares the student's answer with the grader's
# formula at these args in full precision; the lesson's rounded figure is what the message quotes
# (tests/test_io_model.py checks that the formulas reproduce each within its rounding).
LESSON = {
    "naive_bytes": [((8192, 128, 1), 268e6 + 4.2e6, 0.01,
                     "N = 8,192, d = 128: the 4N^2 part is 268 million elements, 4Nd 4 million")],
    "naive_flops": [((8192, 128), 1.1e12 / 32, 0.03,
                     "N = 8K, d = 128: times 32 heads, about 1.1 TFLOP")],
    "naive_intensity": [((1 << 20, 128, 2), 64.0, 0.001, "d = 128 -> 64 FLOPs/byte"),
                        ((1 << 20, 64, 2), 32.0, 0.001, "d = 64 -> 32 FLOPs/byte")],
    "flash_bytes_worst": [((8192, 128, 128, 128, 2), 2 * 8192 ** 2 * 2, 0.02,
                           "d = 128, Br = 128: the worst case is 2N^2 elements")],
    "flash_bytes_l2": [((8192, 128, 2), 4 * 8192 * 128 * 2, 0.0,
                        "the best case: Q, K, V and O once, 4Nd")],
    "sp_bytes": [((32, 8192, 2, 1), 8.6e9, 0.01, "about 8.6 GB of S and P at 8K"),
                 ((32, 16384, 2, 1), 34e9, 0.02, "34 GB at 16K"),
                 ((32, 32768, 2, 1), 137e9, 0.01, "137 GB at 32K (does not fit)")],
    "flash_state_bytes": [((32, 32768, 1), 8e6, 0.05, "8 MB for flash at 32K")],
    "exp_overflow": [(("float16",), 11.09, 0.001, "e^x passes 65,504 at x = 11.09"),
                     (("float32",), 88.7, 0.001, "fp32 overflows at x = 88.7")],
    "sram_bandwidth": [((108, 1.41e9, 128), 19.5e12, 0.01,
                        "108 SMs x 128 bytes per clock x 1.41 GHz = 19.5 TB/s")],
    "ridge_point": [((125e12, 273e9), 460.0, 0.01,
                     "the Spark's ridge point: around 460 on spec-sheet numbers")],
    "bound": [((64.0, 125e12, 273e9), "memory", 0.0,
               "naive attention at 64 FLOPs/byte on the Spark (ridge ~460): memory-bound"),
              ((8192.0, 125e12, 273e9), "compute", 0.0,
               "flash at N = 8K, intensity in the thousands: compute-bound")],
}


def lesson_calls(fn: str) -> list:
    """(args, label) of the lesson's worked numbers for `fn`."""
    return [(args, f"the lesson: {label}") for args, _, _, label in LESSON.get(fn, [])]


# ------------------------------------------------------------------------------ random shapes

DIMS = (16, 32, 48, 64, 80, 96, 128, 160, 256)
BLOCKS = (16, 32, 64, 128, 256)


def rand_n(rng, low=1, high=1 << 17) -> int:
    """A sequence length, log-uniform in [low, high]; odd more often than not."""
    return int(np.exp(rng.uniform(np.log(low), np.log(high))))


def shapes(rng, count: int, elem=(2, 4), high=1 << 17):
    """`count` fresh (N, d, elem_bytes): N from 1 up, ragged; d a head size or any small int;
    every size in `elem` at least once where count allows, in a drawn order (a mistake that one
    size hides, bytes counted as elements with 1-byte elements, showed in some draws only)."""
    out = []
    order = rng.permutation(count)
    for i in range(count):
        d = int(rng.choice(DIMS)) if i % 3 else int(rng.integers(1, 300))
        out.append((rand_n(rng, 1, high), d, int(elem[order[i] % len(elem)])))
    return out


def block_shapes(rng, count: int, elem=(2, 4), high=1 << 17):
    """(N, d, Br, Bc, elem_bytes): Br != Bc in every case, and N a multiple of Br in about a
    third of them (the lesson's exact formula) and ragged in the rest."""
    out = []
    for N, d, e in shapes(rng, count, elem, high):
        Br, Bc = (int(b) for b in rng.choice(BLOCKS, size=2, replace=False))
        if len(out) % 3 == 0:
            N = Br * max(1, N // Br)
        out.append((N, d, Br, Bc, e))
    return out


def devices(rng, count: int):
    """(peak FLOP/s, bandwidth bytes/s) of made-up chips: 1 to 2,000 TFLOP/s, 50 GB/s to 8 TB/s."""
    return [(float(10 ** rng.uniform(12, 15.3)), float(10 ** rng.uniform(10.7, 12.9)))
            for _ in range(count)]
