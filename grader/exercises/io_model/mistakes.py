"""io_model's known wrong counts: for each function, the answers of plausible mistakes (computed
from the same arguments) and the hint each earns. judging.py shows a hint only when the student's
answer equals that mistake's answer, so a hint states what the evidence shows."""

from __future__ import annotations

import math

import numpy as np

from grader.exercises.io_model import reference as ref


def _blocks_float(N, d, Br, Bc, e):
    return (2 * N * d + N / Br * 2 * N * d) * e


# {function: [(mistake, answer(*args), hint)]}; args are the call's, in the function's order
MISTAKES = {
    "naive_bytes": [
        ("elements", lambda N, d, e: 4 * N * N + 4 * N * d,
         "The answer is the count in elements, not bytes: 4N^2 + 4Nd elements, times elem_bytes "
         "(2 for fp16)."),
        ("no_io", lambda N, d, e: 4 * N * N * e,
         "Only the 4N^2 of S and P: add the useful inputs and outputs, 4Nd (read Q and K, read V, "
         "write O), small but part of the count."),
        ("one_trip", lambda N, d, e: (2 * N * N + 4 * N * d) * e,
         "S and P each go out AND come back: write S, read S, write P, read P is 4N^2, not 2N^2."),
        ("three_trips", lambda N, d, e: (3 * N * N + 4 * N * d) * e,
         "Count the trips of S and P: write S, read S, write P, read P (with V): 4N^2."),
    ],
    "naive_flops": [
        ("half", lambda N, d: 2 * N * N * d,
         "Half the FLOPs: two matmuls, 2N^2 d for Q K^T and 2N^2 d for P V (a multiply-add is "
         "2 FLOPs), 4N^2 d in all."),
        ("d_squared", lambda N, d: 4 * N * N * d * d,
         "Each score is a dot product of length d, not d^2: 4N^2 d in all."),
    ],
    "naive_intensity": [
        ("grows_with_n", lambda N, d, e: ref.naive_flops(N, d) / (4 * N * d * e),
         "The intensity grows with N: it divides by the 4Nd inputs and outputs only. Naive "
         "attention moves 4N^2 + 4Nd elements, so its intensity is about d / 2 whatever N is: "
         "more work and proportionally more bytes, you never climb out."),
        ("d_over_2", lambda N, d, e: d / 2,
         "d / 2 is the large-N limit of the lesson's approximation; return naive_flops / "
         "naive_bytes exactly (the 4Nd part included)."),
        ("elements", lambda N, d, e: ref.naive_flops(N, d) / (4 * N * N + 4 * N * d),
         "FLOPs per element, not per byte: divide by bytes (elements times elem_bytes)."),
    ],
    "flash_bytes_worst": [
        ("no_factor_2", lambda N, d, Br, Bc, e: (2 * N * d + ref.query_blocks(N, Br) * N * d) * e,
         "Without the 2: each query block reads K AND V, 2Nd per block, 2N^2 d / Br in all."),
        ("bc_for_br", lambda N, d, Br, Bc, e: ref.flash_bytes_worst(N, d, Bc, Br, e),
         "Br and Bc swapped: K and V are read once per QUERY block, so the count depends on Br "
         "(query rows per program); Bc only sets the size of each K/V step."),
        ("n_over_br", _blocks_float,
         "N / Br query blocks when Br does not divide N: there are ceil(N / Br) blocks; the last "
         "is short but still reads all of K and V."),
        ("elements", lambda N, d, Br, Bc, e: ref.flash_bytes_worst(N, d, Br, Bc, 1),
         "The answer is in elements, not bytes: times elem_bytes."),
        ("no_q_o", lambda N, d, Br, Bc, e: ref.query_blocks(N, Br) * 2 * N * d * e,
         "Q is read once and O written once: add their 2Nd to the K/V re-reads."),
    ],
    "flash_bytes_l2": [
        ("kv_only", lambda N, d, e: 2 * N * d * e,
         "Q, K, V AND O cross HBM once each: 4Nd."),
        ("elements", lambda N, d, e: 4 * N * d,
         "4Nd is elements: times elem_bytes."),
    ],
    "flash_bytes_sram": [
        ("d_not_d2", lambda N, d, M, e: (2 * N * d + 2 * N * N * d / M) * e,
         "Br = M / d puts a second d in the numerator: 2N^2 d / Br = 2N^2 d^2 / M, the paper's "
         "Theta(N^2 d^2 / M); d instead of d^2 substituted Br = M."),
        ("br_is_m_over_d_squared", lambda N, d, M, e: (2 * N * d + 2 * N * N * d ** 3 / M) * e,
         "Br = M / d: 2N^2 d / (M / d) = 2N^2 d^2 / M, d^2 and not d^3."),
        ("elements", lambda N, d, M, e: ref.flash_bytes_sram(N, d, M, 1),
         "The answer is in elements, not bytes: times elem_bytes."),
    ],
    "sp_bytes": [
        ("s_only", lambda H, N, e, B: B * H * N * N * e,
         "S AND P: both N x N, both alive at once: 2 x H x N^2 x 2 bytes."),
        ("one_head", lambda H, N, e, B: 2 * N * N * e,
         "Every head has its own S and P: times H (and B)."),
        ("elements", lambda H, N, e, B: 2 * B * H * N * N,
         "Elements, not bytes: times elem_bytes."),
    ],
    "flash_state_bytes": [
        ("one_number", lambda H, N, B: B * H * N * 4,
         "Two numbers per query row (m and l), fp32: 8 bytes a row."),
        ("fp16", lambda H, N, B: 2 * B * H * N * 2,
         "m and l are kept in fp32 (4 bytes), whatever the inputs' dtype."),
    ],
    "exp_overflow": [
        ("max_value", lambda dt: float(np.finfo(np.dtype(dt)).max),
         "That is the largest finite value itself (65,504 for fp16): e^x passes it at "
         "x = ln(65,504) = 11.09; the threshold is the log of the largest value."),
        ("log10", lambda dt: math.log10(float(np.finfo(np.dtype(dt)).max)),
         "log10 of the largest value: e^x needs the natural log, ln(65,504) = 11.09 for fp16."),
        ("log2", lambda dt: math.log2(float(np.finfo(np.dtype(dt)).max)),
         "log2 of the largest value: e^x needs the natural log, ln(65,504) = 11.09 for fp16."),
    ],
    "ridge_point": [
        ("inverted", lambda f, b: b / f,
         "Upside down: the ridge point is peak FLOP/s divided by bandwidth (FLOPs per byte)."),
    ],
    "sram_bandwidth": [
        ("no_bytes", lambda s, c, bpc: s * c,
         "SMs x clock counts clocks, not bytes: times the 128 bytes each SM moves per clock."),
        ("one_sm", lambda s, c, bpc: bpc * c,
         "One SM's bandwidth: the aggregate is SMs x 128 bytes per clock x clock."),
    ],
    "bound": [
        ("inverted", lambda i, f, b: "compute" if i < f / b else "memory",
         "Backwards: left of the ridge point (intensity below peak FLOP/s / bandwidth) the job "
         "waits on memory: memory-bound."),
    ],
}

# rounded constants where the lesson's figures should have been computed
ROUNDED = ("A rounded constant: compute the threshold from the dtype, ln(np.finfo(dtype).max), "
           "to full precision (the lesson's 11.09 and 88.7 are rounded for reading).")
