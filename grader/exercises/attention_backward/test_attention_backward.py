"""Checks for exercises/attention_backward.py (extension track; lesson: "FlashAttention's forward
pass" step 4, L = m + log(l), "The backward pass: recompute instead of remember", and
FlashAttention-2's skipping of blocks above the diagonal).

Every check draws fresh inputs from `rng`, computes the float64 reference here, in the trusted
process, and calls the student's functions through the worker. The backward checks give the
student the reference O and L (rounded to the input dtype), so a wrong forward never costs
backward points. One idea per check:

  forward_matches_float64     O and L, ragged sizes, Br != Bc, not causal
  lse_includes_m              L = m + log(l) in the natural log, on scores near 500
  causal_mask                 j <= i, the diagonal block with Br != Bc, short last blocks
  max_in_last_block           O and L when the row max sits in the last key block
  backward_matches_float64    dQ, dK, dV against float64 analytic gradients
  backward_causal             the same with causal=True
  backward_finite_difference  a few entries against central differences of the loss
  backward_recomputes_from_L  P = e^(S - L) from the L given, not from a running max
  backward_large_scores       scores near 500: exp(S) alone overflows
  memory_is_linear            forward + backward hold nothing N x N
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import reference
from grader.sandbox import memory
from grader.judge.compare import Cases, CheckFailed, assert_close, values
from grader.judge.inputs import randn, round_to

KiB, MiB = 1 << 10, 1 << 20
# (N, d, Br, Bc): N = 1, N < Br, N a multiple of neither block, Br < Bc and Br > Bc
RAGGED = [(1, 16, 8, 8), (7, 32, 4, 3), (113, 64, 32, 48), (200, 32, 64, 16)]


# ------------------------------------------------------------------ float64 references

_scores = reference.causal_scores


def forward_reference(Q, K, V, causal=False, strict=False):
    """Float64 (O, L). strict=True: the off-by-one mask j < i (row 0 then has no key: NaN)."""
    return reference.attention_lse(Q, K, V, causal, strict)[:2]


def backward_reference(Q, K, V, O, L, dO, causal=False, mistake=None, Bc=None):
    """Float64 (dQ, dK, dV) by the lesson's formulas from the given O and L. `mistake` gives a
    known wrong answer instead, for hints: "no_D", "running_max" (P = e^(S - m) with m the
    running max over key blocks of Bc), "dK_unscaled", "dQ_unscaled"."""
    Q, K, V, O, dO = (np.asarray(t, np.float64) for t in (Q, K, V, O, dO))
    L = np.asarray(L, np.float64)
    scale = 1.0 / np.sqrt(Q.shape[1])
    S = _scores(Q, K, causal)
    if mistake == "running_max":
        P = np.empty_like(S)
        m = np.full(S.shape[0], -np.inf)
        for j in range(0, S.shape[1], Bc):
            m = np.maximum(m, S[:, j:j + Bc].max(axis=1))
            P[:, j:j + Bc] = np.exp(S[:, j:j + Bc] - m[:, None])
    else:
        P = np.exp(S - L[:, None])
    dV = P.T @ dO
    dP = dO @ V.T
    D = 0.0 if mistake == "no_D" else (dO * O).sum(axis=1, keepdims=True)
    dS = P * (dP - D)
    dQ = dS @ K * (1.0 if mistake == "dQ_unscaled" else scale)
    dK = dS.T @ Q * (1.0 if mistake == "dK_unscaled" else scale)
    return dQ, dK, dV


MISTAKES = {
    "no_D": "dQ and dK equal the gradients without the D term: the D trick, D = rowsum(dO o O), "
            "one number per row, and dS = P o (dP - D), not P o dP.",
    "running_max": "The gradients equal those of P = e^(S - m) with m a running max over the key "
                   "blocks: recompute instead of remember rebuilds the exact probabilities from "
                   "L, P = e^(S - L); no running max is needed, L already is the normalizer.",
    "dK_unscaled": "dK is sqrt(d) times too large: the scale is missing in dK; "
                   "dK += dS^T Q * scale, with scale = 1/sqrt(d).",
    "dQ_unscaled": "dQ is sqrt(d) times too large: the scale is missing in dQ; "
                   "dQ += dS K * scale, with scale = 1/sqrt(d).",
}


def _close(got, want) -> bool:
    g = np.asarray(values(got), np.float64)
    return g.shape == want.shape and bool(np.all(np.abs(g - want) <= 1e-3 * (1 + np.abs(want))))


def backward_hint(got, Q, K, V, O, L, dO, causal, Bc) -> str:
    """The hint of a known mistake when the student's gradients equal its answer, else ''."""
    try:
        dq, dk, dv = got
    except (TypeError, ValueError):
        return ""
    for mistake, hint in MISTAKES.items():
        want = backward_reference(Q, K, V, O, L, dO, causal, mistake, Bc)
        if all(_close(g, w) for g, w in zip((dq, dk, dv), want)):
            return hint
    return ""


def lse_hint(got_L, Q, K, causal=False) -> str:
    """The hint when L is log(l) without m, or m + log2(l)."""
    S = _scores(Q, K, causal)
    m = S.max(axis=1)
    l = np.exp(S - m[:, None]).sum(axis=1)
    if _close(got_L, np.log(l)):
        return ("L equals log(l) without the max: L = m + log(l), the log of the whole row's "
                "softmax denominator, so that P = e^(S - L) comes out right in the backward pass.")
    if _close(got_L, m + np.log2(l)):
        return ("L equals m + log2(l): use the natural log, L = m + log(l) (np.log), the base "
                "that e^(S - L) undoes.")
    return ""


# ------------------------------------------------------------------ calling the student

def _unpack(got, what, n):
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
    O, L = _unpack(got, what, 2)
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
    got = _unpack(sub.tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal=causal), what, 3)
    want = backward_reference(Q, K, V, O, L, dO, causal)
    N, d = Q.shape
    label = f"N={N}, d={d}, {dtype}, {case}"
    try:
        for name, g, w in zip(("dQ", "dK", "dV"), got, want):
            # dQ and dK sum N products of P, dP and K or Q: float32 rounding grows with |dS|
            assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=label,
                         seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=backward_hint(got, Q, K, V, O, L, dO, causal, Bc)) from None


def _qkv(rng, N, d, dtype, n=3):
    return tuple(randn(rng, (N, d), dtype) for _ in range(n))


def _large(rng, N, d, dtype, near=512):
    """Integer Q, K (scores exact in float32 with d = 64) with every score near `near`, spread ~2."""
    Q, K = (rng.integers(-2, 3, (N, d)).astype(np.float64) for _ in range(2))
    Q[:, 0] = K[:, 0] = np.sqrt(near * np.sqrt(d))
    return Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)


# ------------------------------------------------------------------ forward

@pytest.mark.check("attention_backward.forward_matches_float64")
def test_forward_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in RAGGED:
            Q, K, V = _qkv(rng, N, d, dtype)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                check_forward(sub, Q, K, V, Br, Bc, False, "random", rng.seed)
    cases.finish()


@pytest.mark.check("attention_backward.lse_includes_m")
def test_lse_includes_m(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # every score near 512: log(l) alone is about 5, L about 517; in float32 exp(512) is inf
    for dtype, N, Br, Bc in (("float32", 150, 32, 48), ("float64", 97, 16, 40)):
        Q, K, V = _large(rng, N, 64, dtype)
        with cases.case(f"N={N}, d=64, {dtype}, Br={Br}, Bc={Bc}, every score near 512",
                        seed=rng.seed):
            check_forward(sub, Q, K, V, Br, Bc, False, "every score near 512", rng.seed,
                          hint="Subtract the running max before exp, and L = m + log(l).")
    cases.finish()


@pytest.mark.check("attention_backward.causal_mask")
def test_causal_mask(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # Br == Bc first: the diagonal falls on whole blocks; then Br != Bc, where a key block
    # crosses the diagonal without starting at i; N a multiple of neither (short last blocks)
    shapes = [(100, 32, 16, 16, "float64"), (113, 64, 32, 48, "float32"),
              (77, 32, 24, 10, "float64"), (50, 16, 4, 12, "float32")]
    passed_square = False
    for N, d, Br, Bc, dtype in shapes:
        Q, K, V = _qkv(rng, N, d, dtype)
        label = f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}"
        with cases.case(label, seed=rng.seed):
            try:
                check_forward(sub, Q, K, V, Br, Bc, True, "causal", rng.seed)
            except CheckFailed as e:
                got = sub.tiled_attention_lse(Q, K, V, Br, Bc, causal=True)
                hint = e.hint
                O_strict, _ = forward_reference(Q, K, V, True, strict=True)
                O = np.asarray(values(_unpack(got, "tiled_attention_lse", 2)[0]), np.float64)
                if O.shape == O_strict.shape and _close(O[1:], O_strict[1:]):
                    hint = ("Off by one: the output equals attention with key j visible only when "
                            "j < i. Query i sees keys j <= i: the diagonal itself is visible.")
                elif passed_square and Br != Bc:
                    hint = ("Right with Br == Bc, wrong with Br != Bc: mask every key block that "
                            "crosses the diagonal (j + Bc - 1 > i), not only the one that starts "
                            "at j == i; with Br != Bc the diagonal block is not the one with j == i.")
                raise CheckFailed(str(e), hint=hint) from None
        passed_square = passed_square or Br == Bc
    cases.finish()


@pytest.mark.check("attention_backward.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype, N, d, Br, Bc in (("float32", 200, 64, 32, 48), ("float64", 113, 32, 64, 16)):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        boosted = min(3, N - (N - 1) // Bc * Bc)
        Q[:, 0] = 1.0
        K[-boosted:, 0] += round(10 * np.sqrt(d))     # scores +10 in the last key block only
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_forward(sub, Q, K, V, Br, Bc, False, "row max in the last key block", rng.seed,
                          hint="When the row max moves into the last block, acc and l are "
                               "rescaled by alpha = exp(m - m_new), and L = m + log(l) uses the "
                               "final m.")
    cases.finish()


# ------------------------------------------------------------------ backward

@pytest.mark.check("attention_backward.backward_matches_float64")
def test_backward_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in RAGGED:
            Q, K, V, dO = _qkv(rng, N, d, dtype, 4)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                check_backward(sub, Q, K, V, dO, Br, Bc, False, "random", rng.seed)
    cases.finish()


@pytest.mark.check("attention_backward.backward_causal")
def test_backward_causal(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for N, d, Br, Bc, dtype in ((64, 16, 16, 16, "float64"), (113, 64, 32, 48, "float32"),
                                (77, 32, 24, 10, "float64")):
        Q, K, V, dO = _qkv(rng, N, d, dtype, 4)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_backward(sub, Q, K, V, dO, Br, Bc, True, "causal", rng.seed)
    cases.finish()


@pytest.mark.check("attention_backward.backward_finite_difference")
def test_backward_finite_difference(student, rng):
    """A few entries of dQ, dK, dV against central differences of loss = sum(O * dO), with O
    computed here in float64: the gradients are those of attention itself, whatever formulas
    produced them."""
    sub = student()
    N, d, Br, Bc, h = 37, 16, 8, 12, 1e-6
    for causal in (False, True):
        Q, K, V, dO = _qkv(rng, N, d, "float64", 4)
        O, L = forward_reference(Q, K, V, causal)
        what = f"tiled_backward(Q, K, V, O, L, dO, Br={Br}, Bc={Bc}, causal={causal})"
        got = _unpack(sub.tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal=causal), what, 3)
        inputs = {"dQ": Q, "dK": K, "dV": V}
        for (name, X), g in zip(inputs.items(), got):
            g = np.asarray(values(g), np.float64)
            if g.shape != (N, d):
                raise CheckFailed(f"{what}: {name}: expected shape {(N, d)}, got {g.shape}")
            for _ in range(3):
                r, c = int(rng.integers(N)), int(rng.integers(d))
                old = X[r, c]
                X[r, c] = old + h
                up = (forward_reference(Q, K, V, causal)[0] * dO).sum()
                X[r, c] = old - h
                down = (forward_reference(Q, K, V, causal)[0] * dO).sum()
                X[r, c] = old
                fd = (up - down) / (2 * h)
                if not abs(g[r, c] - fd) <= 1e-5 * (1 + abs(fd)):
                    raise CheckFailed(
                        f"{what} (N={N}, d={d}, float64) [seed {rng.seed}]: {name}[{r}, {c}]: "
                        f"expected {fd:.8g} (central difference of sum(O * dO)), got "
                        f"{g[r, c]:.8g}",
                        hint=backward_hint(got, Q, K, V, O, L, dO, causal, Bc))


@pytest.mark.check("attention_backward.backward_recomputes_from_L")
def test_backward_recomputes_from_L(student, rng, credit):
    """L + a known shift per row: the lesson's backward rebuilds P = e^(S - L) from the L it is
    given, so every gradient follows that L. A backward that finds its own normalizer (a running
    max, a second pass for l) does not."""
    sub = student()
    cases = Cases(credit)
    for dtype, N, d, Br, Bc in (("float64", 60, 32, 16, 24), ("float32", 45, 16, 8, 8)):
        Q, K, V, dO = _qkv(rng, N, d, dtype, 4)
        shift = rng.uniform(-1.0, 1.0, N)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}, L shifted by up to 1",
                        seed=rng.seed):
            try:
                check_backward(sub, Q, K, V, dO, Br, Bc, False, "L shifted per row", rng.seed,
                               L_shift=shift)
            except CheckFailed as e:
                raise CheckFailed(
                    f"{e}. L was the true logsumexp plus a per-row shift in [-1, 1]; expected the "
                    f"gradients of P = e^(S - L) with that L",
                    hint=e.hint or "Recompute instead of remember: P = e^(S - L) with the L you "
                                   "are given; it already is the row's normalizer, so no "
                                   "running max and no second pass over the row.") from None
    cases.finish()


@pytest.mark.check("attention_backward.backward_large_scores")
def test_backward_large_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for causal in (False, True):
        Q, K, V = _large(rng, 130, 64, "float64", near=800)   # exp(800) is inf even in float64
        dO = randn(rng, (130, 64), "float64")
        with cases.case(f"N=130, d=64, float64, Br=32, Bc=48, causal={causal}, scores near 800",
                        seed=rng.seed):
            try:
                check_backward(sub, Q, K, V, dO, 32, 48, causal, "scores near 800", rng.seed)
            except CheckFailed as e:
                blew = "NaN" in str(e) or "overflowed" in str(e)
                raise CheckFailed(str(e), hint=e.hint or (
                    "P = e^(S - L): with L the row's logsumexp every exponent is <= 0; e^S alone "
                    "overflows at scores near 800." if blew else "")) from None
    cases.finish()


# ------------------------------------------------------------------ memory

@pytest.mark.check("attention_backward.memory_is_linear")
def test_memory_is_linear(student, rng):
    """N = 1500, d = 16, Br = Bc = 16, causal: the forward and then the backward, each in a fresh
    worker with tracemalloc on and its peak resident memory (VmHWM) read from here, as
    tiled_attention.memory_is_tiled measures. Anything N x N (a float32 score or probability
    matrix is 9 MB) is far above the bound: the outputs, three N x d temporaries, vectors of N,
    a few tiles."""
    sub = student()
    N, d, Br, Bc, dtype = 1500, 16, 16, 16, "float32"
    Q, K, V, dO = _qkv(rng, N, d, dtype, 4)
    O_ref, L_ref = forward_reference(Q, K, V, True)
    O = round_to(O_ref, dtype)
    item = np.dtype(dtype).itemsize
    tile = 8 * (3 * Br * Bc + 4 * Br * d + 4 * Bc * d)
    calls = [("tiled_attention_lse", (Q, K, V, Br, Bc), 2),
             ("tiled_backward", (Q, K, V, O, L_ref, dO, Br, Bc), 3)]
    for fn, args, n_out in calls:
        what = f"{fn}(..., Br={Br}, Bc={Bc}, causal=True)"
        case = f"N={N}, d={d}, {dtype}"
        with memory.fresh_worker(sub) as fresh:
            baseline = memory.fresh_baseline(fresh)
            try:
                if baseline is not None:
                    with memory.peak_rss(fresh) as rss:
                        res = fresh.call(fn, *args, causal=True, opts={"tracemalloc": True})
                else:
                    res = fresh.call(fn, *args, causal=True, opts={"tracemalloc": True})
            except memory.Unmeasurable as e:
                raise CheckFailed(f"{what} ({case}) [seed {rng.seed}]: {e}, though a fresh "
                                  f"worker's could be; the memory check fails closed.",
                                  hint="Leave the process alone: no prctl, no changes to /proc.") from None
        # every output counted as float64 (float32 input may give float64 gradients)
        outputs = n_out * N * d * 8
        # and up to three N x d float64 temporaries (dO * O for D, a float64 copy of an input)
        bound = outputs + 3 * N * d * 8 + 4 * N * 8 + 4 * tile + 16 * KiB
        peak = int(res.extras.get("peak_bytes", 0))
        if peak > bound:
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: expected peak memory under {bound} bytes "
                f"(the outputs and three N x d temporaries as float64, a few vectors of N, 4 tile steps, 16 KiB), got {peak} "
                f"bytes as tracemalloc saw it; the N x N scores are {N * N * item} bytes, a Br x N "
                f"strip {Br * N * item}.",
                hint="Recompute instead of remember: S and P exist one (Br, Bc) tile at a time, "
                     "in the forward and in the backward; nothing N x N is built or kept.",
                follows=())
        if baseline is not None:
            resident = rss["bytes"] - baseline
            rss_bound = 4 * (5 * N * d * item + outputs) + 6 * MiB
            if resident > rss_bound:
                raise CheckFailed(
                    f"{what} ({case}) [seed {rng.seed}]: expected the worker's peak resident "
                    f"memory within {rss_bound} bytes of a fresh worker's, got {resident} more "
                    f"(tracemalloc saw {peak}); the N x N scores are {N * N * item} bytes.",
                    hint="Nothing N x N may exist anywhere, in any kind of memory, nor be "
                         "prepared at import: one (Br, Bc) tile at a time.", follows=())
        # memory first, then the values: the point needs the right answer from this call
        got = _unpack(res.value, what, n_out)
        if fn == "tiled_attention_lse":
            for name, g, w in zip(("O", "L"), got, (O_ref, L_ref)):
                assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=case,
                             seed=rng.seed)
        else:
            want = backward_reference(Q, K, V, O, L_ref, dO, True)
            for name, g, w in zip(("dQ", "dK", "dV"), got, want):
                assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=case,
                             seed=rng.seed)
        if peak < N * d * item:
            raise CheckFailed(f"{what} ({case}) [seed {rng.seed}]: tracemalloc saw a peak of "
                              f"{peak} bytes, less than one N x d output: compute with NumPy "
                              f"arrays allocated in the call, and leave tracemalloc alone.")
