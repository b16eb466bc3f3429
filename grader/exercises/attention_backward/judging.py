"""How attention_backward's checks call the student and judge the answers: tiled_attention_lse's
O and L and tiled_backward's dQ, dK, dV against float64 (grader.judge.answers.compare's
tolerances), with the hint of a known mistake when the answer equals its (mistakes.py). The
backward is given the reference O and L (rounded to the input dtype), so a wrong forward never
costs backward points. The check modules and the hidden checks import these."""

from __future__ import annotations

import numpy as np

from grader.exercises.attention_backward.mistakes import backward_hint, lse_hint
from grader.exercises.attention_backward.reference import backward_reference, forward_reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.inputs import round_to


# ------------------------------------------------------------------ calling the student

def unpack(got, what, n):
    """The n arrays a call returned, as a tuple; CheckFailed when it returned anything else."""
    try:
        parts = tuple(got)
    except TypeError:
        parts = ()
    if len(parts) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} arrays, got {type(got).__name__}"
                          + (f" of length {len(parts)}" if parts else ""))
    return parts


def check_forward(sub, Q, K, V, Br, Bc, causal, case, seed, hint=""):
    """Call tiled_attention_lse and compare O and L with float64. Returns nothing."""
    what = f"tiled_attention_lse(Q, K, V, Br={Br}, Bc={Bc}, causal={causal})"
    got = sub.tiled_attention_lse(Q, K, V, Br, Bc, causal=causal)
    O, L = unpack(got, what, 2)
    O_ref, L_ref = forward_reference(Q, K, V, causal)
    N, d = Q.shape
    label = f"N={N}, d={d}, {Q.dtype.name}, {case}"
    try:
        assert_close(L, L_ref, what=f"{what}: L", input_dtype=Q.dtype.name, terms=N,
                     case=label, seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=lse_hint(L, Q, K, causal) or hint) from None
    assert_close(O, O_ref, what=f"{what}: O", input_dtype=Q.dtype.name, terms=N, case=label,
                 seed=seed)


def check_backward(sub, Q, K, V, dO, Br, Bc, causal, case, seed, L_shift=None):
    """Call tiled_backward with the reference O and L (rounded to Q's dtype; L + L_shift where
    given) and compare dQ, dK, dV with the lesson's formulas in float64."""
    dtype = Q.dtype.name
    O_ref, L_ref = forward_reference(Q, K, V, causal)
    O = round_to(O_ref, dtype)
    L = L_ref + (0.0 if L_shift is None else L_shift)
    what = f"tiled_backward(Q, K, V, O, L, dO, Br={Br}, Bc={Bc}, causal={causal})"
    got = unpack(sub.tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal=causal), what, 3)
    want = backward_reference(Q, K, V, O, L, dO, causal)
    N, d = Q.shape
    label = f"N={N}, d={d}, {dtype}, {case}"
    try:
        for name, g, w in zip(("dQ", "dK", "dV"), got, want):
            # dQ and dK sum N products of P, dP and K or Q: float32 rounding grows with |dS|
            assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=label,
                         seed=seed)
    except CheckFailed as e:
        L_true = None if L_shift is None else L_ref
        raise CheckFailed(str(e), hint=backward_hint(got, Q, K, V, O, L, dO, causal, Br, Bc,
                                                     L_true)) from None


# ------------------------------------------------------------------ block skipping

def reads_per_row(log: dict) -> np.ndarray:
    """How many reads of a recording array (grader.worker.recorders, rows kept) covered each
    row, whole-array reads left out: (n,) ints. A log that is not what the recorder writes
    (the worker's, so the student's process could have changed it) fails, saying so."""
    n, ranges = log.get("n"), log.get("ranges")
    ok = type(n) is int and 0 <= n and isinstance(ranges, list) and all(
        isinstance(r, list) and len(r) == 3 and all(type(x) is int for x in r)
        and 0 <= r[1] <= r[2] <= n for r in ranges)
    if not ok:
        raise CheckFailed("the grader's record of the reads came back malformed, so the skipped "
                          "blocks cannot be seen; the evidence was missing, which is never a pass.")
    count = np.zeros(n, np.int64)
    for _, start, stop in ranges:
        if not (start == 0 and stop == n):
            count[start:stop] += 1
    return count


def blocks_above_diagonal(count, N, Br, Bc) -> list[int]:
    """The key blocks read more often than skipping allows. Row 0 is read by every query
    block (by each of its tiles, as often as the code reads a tile); a forward that skips the
    blocks above the diagonal reads key block j only in the query blocks that reach it, those
    whose last row is >= j, so at most count[0] * reach / n_query_blocks times."""
    n_q = -(-N // Br)
    last_rows = np.minimum(np.arange(0, N, Br) + Br - 1, N - 1)
    over = []
    for j in range(0, N, Bc):
        reach = int((last_rows >= j).sum())
        if count[j:j + Bc].max() * n_q > count[0] * reach:
            over.append(j // Bc)
    return over
