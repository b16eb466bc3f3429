"""Counting bytes: the lesson's IO model of attention, as functions.

Lesson sections "Two kinds of memory on one chip", "What naive attention actually does",
"Softmax, the safe way" and "Counting bytes: the IO argument". Before any kernel, count: how
many bytes each version of attention moves between HBM and the chip, how many FLOPs it does,
and which of the two the chip runs out of first. Write twelve short functions:

    naive_bytes, naive_flops, naive_intensity    the three-line version, per head
    flash_bytes_worst, flash_bytes_l2            the Q-block-outer flash forward, per head:
                                                 every K/V re-read from HBM, or none
    flash_bytes_sram                             the worst case with Br = M / d: Theta(N^2 d^2 / M)
    sp_bytes, flash_state_bytes                  what naive and flash hold in memory
    exp_overflow                                 where e^x overflows a float format
    ridge_point, sram_bandwidth, bound           the roofline: which one limits you

Every count is per head (multiply by B * H for a batch) and exact: integers where the count is
an integer (Python ints: no rounding, no overflow). NumPy and plain Python; no GPU needed.

Run:
    python exercises/io_model.py                # the lesson's worked numbers (raises until done)
    make check EX=io_model                      # the grader's checks for this exercise
"""
import math

import numpy as np


def naive_bytes(N: int, d: int, elem_bytes: int = 2) -> int:
    """HBM bytes the three-line attention moves for one head (the minimum: no scale or mask pass).

    Args:
        N: sequence length (queries = keys = N), N >= 1.
        d: head dimension, d >= 1.
        elem_bytes: bytes per element (2 for fp16/bf16, 4 for fp32).
    Returns:
        int: bytes read and written through HBM by S = Q K^T, P = softmax(S), O = P V.
    """
    # TODO(io_model): roughly 1 line. Count in elements, kernel by kernel: each one reads its
    #   inputs from HBM and writes its output to HBM (S = Q K^T, P = softmax(S), O = P V).
    #   Then convert elements to bytes.
    raise NotImplementedError("TODO(io_model): naive_bytes - elements each kernel reads and writes, times elem_bytes")


def naive_flops(N: int, d: int) -> int:
    """FLOPs of attention for one head: the two matmuls (a multiply-add is 2 FLOPs).

    Args:
        N: sequence length, N >= 1.
        d: head dimension, d >= 1.
    Returns:
        int: FLOPs of Q K^T plus P V (the softmax's few N^2 operations are left out).
    """
    # TODO(io_model): roughly 1 line. An (m x k) @ (k x n) matmul is 2 m k n FLOPs.
    raise NotImplementedError("TODO(io_model): naive_flops - the FLOPs of Q K^T and P V")


def naive_intensity(N: int, d: int, elem_bytes: int = 2) -> float:
    """Arithmetic intensity of naive attention: FLOPs per byte moved to or from HBM.

    Args:
        N, d, elem_bytes: as for naive_bytes.
    Returns:
        float: naive_flops(N, d) / naive_bytes(N, d, elem_bytes), exactly (the small 4Nd part
        included); about d / 2 for fp16 at large N.
    """
    # TODO(io_model): roughly 1 line, from the two functions above.
    raise NotImplementedError("TODO(io_model): naive_intensity - FLOPs per byte of naive attention")


def flash_bytes_worst(N: int, d: int, Br: int, Bc: int, elem_bytes: int = 2) -> int:
    """HBM bytes of the Q-block-outer flash forward for one head when no re-read hits in L2.

    Each program owns Br query rows: it reads its Q block once, reads all of K and V (in blocks
    of Bc rows), and writes its O block once. There are ceil(N / Br) programs (the last query
    block may be short, but it still reads all of K and V).

    Args:
        N: sequence length, N >= 1.
        d: head dimension.
        Br: query rows per program.
        Bc: key/value rows per step of the inner loop.
        elem_bytes: bytes per element.
    Returns:
        int: bytes. With Br dividing N this is the lesson's 2Nd + 2N^2 d / Br elements.
    """
    # TODO(io_model): roughly 2 lines. Q: read once. K and V: read once per query block.
    #   O: written once. How many query blocks are there when Br does not divide N?
    raise NotImplementedError("TODO(io_model): flash_bytes_worst - Q once, K and V once per query block, O once")


def flash_bytes_l2(N: int, d: int, elem_bytes: int = 2) -> int:
    """HBM bytes of the flash forward for one head when every K/V re-read hits in L2 (best case).

    Args:
        N, d, elem_bytes: as for flash_bytes_worst.
    Returns:
        int: bytes: Q, K, V read once and O written once.
    """
    # TODO(io_model): roughly 1 line.
    raise NotImplementedError("TODO(io_model): flash_bytes_l2 - Q, K, V and O, once each")


def flash_bytes_sram(N: int, d: int, M: int, elem_bytes: int = 2) -> float:
    """The worst case with the block size an SRAM of M elements allows, Br = M / d.

    The lesson: "Br and Bc end up around M / d for an SRAM of M elements. Substitute and the
    paper's theorem pops out": Theta(N^2 d^2 / M) HBM accesses.

    Args:
        N, d: as for flash_bytes_worst.
        M: SRAM size in elements.
        elem_bytes: bytes per element.
    Returns:
        float: (2Nd + 2N^2 d / Br) * elem_bytes with Br = M / d (a real number: no rounding).
    """
    # TODO(io_model): roughly 2 lines. Substitute Br = M / d into 2Nd + 2N^2 d / Br.
    raise NotImplementedError("TODO(io_model): flash_bytes_sram - the worst case with Br = M / d")


def sp_bytes(H: int, N: int, elem_bytes: int = 2, B: int = 1) -> int:
    """Memory that naive attention's S and P take, both alive at once, for B x H heads.

    Args:
        H: heads; N: sequence length; elem_bytes: bytes per element; B: batch size.
    Returns:
        int: bytes of S and P (N x N each, per head).
    """
    # TODO(io_model): roughly 1 line.
    raise NotImplementedError("TODO(io_model): sp_bytes - S and P, N x N each, for every head")


def flash_state_bytes(H: int, N: int, B: int = 1) -> int:
    """What flash keeps instead: 2 numbers per query row (m and l, or L), in fp32, B x H heads.

    Args:
        H: heads; N: sequence length; B: batch size.
    Returns:
        int: bytes.
    """
    # TODO(io_model): roughly 1 line. fp32 is 4 bytes.
    raise NotImplementedError("TODO(io_model): flash_state_bytes - 2 fp32 numbers per query row")


def exp_overflow(dtype: str) -> float:
    """The x past which e^x is larger than the largest finite number of `dtype`.

    Args:
        dtype: a NumPy float dtype name: "float16", "float32" or "float64".
    Returns:
        float: that x, to full float64 precision (no rounded constant).
    """
    # TODO(io_model): roughly 1 line. np.finfo(np.dtype(dtype)).max is the largest finite value.
    raise NotImplementedError("TODO(io_model): exp_overflow - the x where e^x passes the largest finite value")


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The roofline's ridge point.

    Args:
        peak_flops: peak FLOP/s of the chip.
        bandwidth: main-memory bandwidth, bytes/s.
    Returns:
        float: FLOPs per byte at which compute and memory take the same time.
    """
    # TODO(io_model): roughly 1 line.
    raise NotImplementedError("TODO(io_model): ridge_point - peak FLOP/s over bandwidth")


def sram_bandwidth(sms: int, clock_hz: float, bytes_per_clock: int = 128) -> float:
    """Aggregate on-chip SRAM bandwidth, by the lesson's arithmetic.

    Args:
        sms: streaming multiprocessors on the chip.
        clock_hz: SM clock, Hz (1.41e9 for the A100).
        bytes_per_clock: shared-memory bytes one SM delivers per clock.
    Returns:
        float: bytes/s.
    """
    # TODO(io_model): roughly 1 line.
    raise NotImplementedError("TODO(io_model): sram_bandwidth - SMs x bytes per clock x clock")


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """Which ceiling limits a job of this arithmetic intensity on this chip.

    Args:
        intensity: FLOPs per byte of the job.
        peak_flops: the chip's peak FLOP/s.
        bandwidth: its main-memory bandwidth, bytes/s.
    Returns:
        "memory" when the intensity is below the ridge point (the data arrives slower than the
        math units could use it), else "compute".
    """
    # TODO(io_model): roughly 1 line: compare with ridge_point.
    raise NotImplementedError("TODO(io_model): bound - memory-bound left of the ridge point, compute-bound right of it")


if __name__ == "__main__":
    N, d = 8192, 128
    b = naive_bytes(N, d)
    print(f"naive, N={N}, d={d}, fp16: {b / 1e6:.0f} MB per head; the 4Nd inputs and output are "
          f"{100 * 4 * N * d * 2 / b:.1f}% of it")
    for dd in (128, 64):
        print(f"naive intensity, d={dd}: {naive_intensity(N, dd):.1f} FLOPs/byte "
              f"(and {naive_intensity(4 * N, dd):.1f} at 4x the N: flat)")
    print(f"flash worst case, Br=Bc=128: {flash_bytes_worst(N, d, 128, 128) / b:.2f} of naive's "
          f"bytes; with L2: {flash_bytes_l2(N, d) / b:.3f}")
    for n in (8192, 16384, 32768):
        print(f"S and P, H=32, N={n}: {sp_bytes(32, n) / 1e9:.1f} GB; flash's m and l: "
              f"{flash_state_bytes(32, n) / 1e6:.1f} MB")
    print(f"e^x overflows fp16 at x = {exp_overflow('float16'):.2f}, fp32 at "
          f"{exp_overflow('float32'):.1f}")
    a100 = sram_bandwidth(108, 1.41e9)
    print(f"A100 SRAM: 108 SMs x 128 B x 1.41 GHz = {a100 / 1e12:.1f} TB/s, "
          f"{a100 / 1.5e12:.0f}x its 1.5 TB/s HBM")
    ridge = ridge_point(125e12, 273e9)
    print(f"Spark ridge point at 125 TFLOP/s and 273 GB/s: {ridge:.0f} FLOPs/byte; naive "
          f"attention at d=128 is {bound(naive_intensity(N, d), 125e12, 273e9)}-bound")
