"""tiled_attention's judgement of one call: the memory gate every tiled check goes through
(tiled_call), and the comparison with the float64 reference with a hint for a known mistake
(check_tiled, check_naive). Shared by its cpu and adversarial checks and its hidden checks."""

from __future__ import annotations

import numpy as np

from grader.judge import diagnose, reference
from grader.judge.compare import CheckFailed, assert_close, values

KiB, MiB = 1 << 10, 1 << 20

MEMORY = "tiled_attention.memory_is_tiled"


def tile_step(d: int, Br: int, Bc: int) -> int:
    """Bytes of one tile step, each array counted as float64: the (Br, Bc) scores, the (Br, d)
    acc and q, the (Bc, d) k and v."""
    return 8 * (Br * Bc + Br * d + Bc * d)


def tiled_call(sub, Q, K, V, Br: int | None, Bc: int | None, what: str, case: str, seed: int,
               opts: dict | None = None):
    """tiled_attention(Q, K, V[, Br, Bc]) with tracemalloc on in the worker, gated on its
    memory: this exercise's idea is tiling, so a call whose peak holds about the N x N scores
    earns nothing in any tiled check, whatever its output (the kernel-use gate of the Triton
    exercises, for tiles). The gate trips only on N x N evidence: a peak beyond the output of
    more than 4 tile steps + 8 KiB + four float64 N x d arrays (copies of Q, K, V and a float64
    acc for the whole output: wasteful, memory_is_tiled's business, but tiled) AND of at least
    half an N x N float32 matrix (2 N^2 bytes). Where N x N is not well above that (small N,
    large d), nothing can tell the two apart and nothing trips; every tiled check has a case
    where it is."""
    blocks = {} if Br is None else {"Br": Br, "Bc": Bc}
    res = sub.call("tiled_attention", Q, K, V, **blocks, opts={**(opts or {}), "tracemalloc": True})
    N, d = Q.shape
    Br, Bc = Br or 64, Bc or 64
    out_item = max(Q.dtype.itemsize, np.asarray(values(res.value)).dtype.itemsize
                   if np.asarray(values(res.value)).dtype.kind == "f" else 0)
    output = N * d * out_item
    tile = tile_step(d, Br, Bc)
    peak = int(res.extras.get("peak_bytes", 0))
    extra = peak - output
    scores = N * N * Q.dtype.itemsize
    if extra > 4 * tile + 8 * KiB + 4 * N * d * 8 and extra >= 2 * N * N:
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: the call held about the N x N scores: tracemalloc saw "
            f"a peak of {peak} bytes, {extra} beyond the {output}-byte output, where one "
            f"(Br, Bc) tile step takes {tile} bytes and the N x N scores {scores}. An output "
            f"computed without tiles earns no tiled points, right or not (memory_is_tiled "
            f"measures this).",
            hint="Tiling is this exercise's idea: build one (Br, Bc) score tile at a time from "
                 "q = Q[i:i+Br] and k = K[j:j+Bc], never the N x N scores.",
            follows=(MEMORY,))
    return res if opts else res.value


def check_tiled(sub, Q, K, V, Br: int, Bc: int, case: str, seed: int):
    """Call tiled_attention (gated on its memory) and compare with the float64 reference."""
    label = f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}"
    out = tiled_call(sub, Q, K, V, Br, Bc, f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})", label, seed)
    try:
        assert_close(out, reference.attention(Q, K, V),
                     what=f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})",
                     input_dtype=Q.dtype.name, terms=Q.shape[0],
                     case=f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}", seed=seed)
    except CheckFailed as e:
        # the hint only when the output equals a known mistake's answer (grader/judge/diagnose.py)
        raise CheckFailed(str(e), hint=diagnose.attention_hint(
            out, Q, K, V, block_n=Bc, input_dtype=Q.dtype.name) or e.hint) from None


def check_naive(sub, Q, K, V, case: str, seed: int):
    """Call naive_attention and compare with the float64 reference."""
    out = sub.naive_attention(Q, K, V)
    try:
        assert_close(out, reference.attention(Q, K, V),
                     what="naive_attention(Q, K, V)", input_dtype=Q.dtype.name, terms=Q.shape[0],
                     case=f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}", seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=diagnose.attention_hint(
            out, Q, K, V, input_dtype=Q.dtype.name) or e.hint) from None

