"""attention_backward's cpu checks, for exercises/attention_backward.py (extension track; lesson:
"FlashAttention's forward pass" step 4, L = m + log(l), "The backward pass: recompute instead of
remember", and FlashAttention-2's skipping of blocks above the diagonal).

Every check draws fresh inputs from `rng`, computes the float64 reference here, in the trusted
process (reference.py), and calls the student's functions through the worker (judging.py). One
idea per check:

  forward_matches_float64     O and L, ragged sizes, Br != Bc, not causal
  causal_mask                 j <= i, the diagonal block with Br != Bc, short last blocks
  backward_matches_float64    dQ, dK, dV against float64 analytic gradients
  backward_causal             the same with causal=True
  backward_finite_difference  a few entries against central differences of the loss
  memory_is_linear            forward + backward hold nothing N x N

The Break It cases are in test_adversarial.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.attention_backward.judging import (backward_hint, check_backward,
                                                         check_forward, close, unpack)
from grader.exercises.attention_backward.reference import (backward_reference, forward_reference,
                                                           qkv)
from grader.judge.compare import Cases, CheckFailed, assert_close, values
from grader.judge.inputs import round_to
from grader.sandbox import memory

KiB, MiB = 1 << 10, 1 << 20
# (N, d, Br, Bc): N = 1, N < Br, N a multiple of neither block, Br < Bc and Br > Bc
RAGGED = [(1, 16, 8, 8), (7, 32, 4, 3), (113, 64, 32, 48), (200, 32, 64, 16)]


# ------------------------------------------------------------------ forward

@pytest.mark.check("attention_backward.forward_matches_float64")
def test_forward_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in RAGGED:
            Q, K, V = qkv(rng, N, d, dtype)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                check_forward(sub, Q, K, V, Br, Bc, False, "random", rng.seed)
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
        Q, K, V = qkv(rng, N, d, dtype)
        label = f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}"
        with cases.case(label, seed=rng.seed):
            try:
                check_forward(sub, Q, K, V, Br, Bc, True, "causal", rng.seed)
            except CheckFailed as e:
                got = sub.tiled_attention_lse(Q, K, V, Br, Bc, causal=True)
                hint = e.hint
                O_strict, _ = forward_reference(Q, K, V, True, strict=True)
                O = np.asarray(values(unpack(got, "tiled_attention_lse", 2)[0]), np.float64)
                if O.shape == O_strict.shape and close(O[1:], O_strict[1:]):
                    hint = ("Off by one: the output equals attention with key j visible only when "
                            "j < i. Query i sees keys j <= i: the diagonal itself is visible.")
                elif passed_square and Br != Bc:
                    hint = ("Right with Br == Bc, wrong with Br != Bc: mask every key block that "
                            "crosses the diagonal (j + Bc - 1 > i), not only the one that starts "
                            "at j == i; with Br != Bc the diagonal block is not the one with j == i.")
                raise CheckFailed(str(e), hint=hint) from None
        passed_square = passed_square or Br == Bc
    cases.finish()


# ------------------------------------------------------------------ backward

@pytest.mark.check("attention_backward.backward_matches_float64")
def test_backward_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in ("float32", "float64"):
        for N, d, Br, Bc in RAGGED:
            Q, K, V, dO = qkv(rng, N, d, dtype, 4)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                check_backward(sub, Q, K, V, dO, Br, Bc, False, "random", rng.seed)
    cases.finish()


@pytest.mark.check("attention_backward.backward_causal")
def test_backward_causal(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for N, d, Br, Bc, dtype in ((64, 16, 16, 16, "float64"), (113, 64, 32, 48, "float32"),
                                (77, 32, 24, 10, "float64")):
        Q, K, V, dO = qkv(rng, N, d, dtype, 4)
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
        Q, K, V, dO = qkv(rng, N, d, "float64", 4)
        O, L = forward_reference(Q, K, V, causal)
        what = f"tiled_backward(Q, K, V, O, L, dO, Br={Br}, Bc={Bc}, causal={causal})"
        got = unpack(sub.tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal=causal), what, 3)
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


# ------------------------------------------------------------------ memory

def _measured_call(sub, fn, args, what, case, seed):
    """fn(*args, causal=True) in a fresh worker with tracemalloc on, its peak memory counted
    from here where it can be (grader/sandbox/memory.py: the worker's cgroup, or VmHWM): (result, the fresh worker's baseline or None, the
    peak_rss reading or None)."""
    rss = None
    with memory.fresh_worker(sub) as fresh:
        baseline = memory.fresh_baseline(fresh)
        try:
            if baseline is not None:
                with memory.peak_rss(fresh) as rss:
                    res = fresh.call(fn, *args, causal=True, opts={"tracemalloc": True})
            else:
                res = fresh.call(fn, *args, causal=True, opts={"tracemalloc": True})
        except memory.Unmeasurable as e:
            raise CheckFailed(f"{what} ({case}) [seed {seed}]: {e}, though a fresh "
                              f"worker's could be; the memory check fails closed.",
                              hint="Leave the process alone: no prctl, no changes to /proc.") from None
    return res, baseline, rss


@pytest.mark.check("attention_backward.memory_is_linear")
def test_memory_is_linear(student, rng):
    """N = 1500, d = 16, Br = Bc = 16, causal: the forward and then the backward, each in a fresh
    worker with tracemalloc on and its peak memory counted from here (its cgroup, or VmHWM), as
    tiled_attention.memory_is_tiled measures; a call during which tracemalloc was stopped fails. Anything N x N (a float32 score or probability
    matrix is 9 MB) is far above the bound: the outputs, three N x d temporaries, vectors of N,
    a few tiles."""
    sub = student()
    N, d, Br, Bc, dtype = 1500, 16, 16, 16, "float32"
    Q, K, V, dO = qkv(rng, N, d, dtype, 4)
    O_ref, L_ref = forward_reference(Q, K, V, True)
    O = round_to(O_ref, dtype)
    item = np.dtype(dtype).itemsize
    tile = 8 * (3 * Br * Bc + 4 * Br * d + 4 * Bc * d)
    calls = [("tiled_attention_lse", (Q, K, V, Br, Bc), 2),
             ("tiled_backward", (Q, K, V, O, L_ref, dO, Br, Bc), 3)]
    for fn, args, n_out in calls:
        what = f"{fn}(..., Br={Br}, Bc={Bc}, causal=True)"
        case = f"N={N}, d={d}, {dtype}"
        res, baseline, rss = _measured_call(sub, fn, args, what, case, rng.seed)
        if res.extras.get("tracemalloc_tampered"):   # grader/worker/probes.py's sentinel
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: {res.extras['tracemalloc_tampered']}: the "
                f"grader's in-process memory evidence was switched off, so this call earns no "
                f"memory points. Leave tracemalloc alone.",
                hint="The grader measures memory: never stop, restart or clear tracemalloc.",
                follows=())
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
        got = unpack(res.value, what, n_out)
        if fn == "tiled_attention_lse":
            names, want = ("O", "L"), (O_ref, L_ref)
        else:
            names, want = ("dQ", "dK", "dV"), backward_reference(Q, K, V, O, L_ref, dO, True)
        for name, g, w in zip(names, got, want):
            assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=case,
                         seed=rng.seed)
        if peak < N * d * item:
            raise CheckFailed(f"{what} ({case}) [seed {rng.seed}]: tracemalloc saw a peak of "
                              f"{peak} bytes, less than one N x d output: compute with NumPy "
                              f"arrays allocated in the call, and leave tracemalloc alone.")
