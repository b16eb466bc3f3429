"""attention_backward's cpu checks, for exercises/attention_backward.py (extension track; lesson:
"FlashAttention's forward pass" step 4, L = m + log(l), "The backward pass: recompute instead of
remember", and FlashAttention-2's skipping of blocks above the diagonal).

Every check draws fresh inputs from `rng`, computes the float64 reference here, in the trusted
process (reference.py), and calls the student's functions through the worker (judging.py). One
idea per check:

  forward_matches_float64     O and L, ragged sizes, Br != Bc, not causal
  causal_mask                 j <= i, the diagonal block with Br != Bc, short last blocks
  causal_skips_blocks         the key blocks above the diagonal are skipped, not computed
                              (advice, no points: a read log, built in the worker)
  backward_matches_float64    dQ, dK, dV against float64 analytic gradients
  backward_causal             the same with causal=True
  backward_finite_difference  an entry per row against central differences of the loss
  memory_is_linear            forward + backward hold nothing N x N (counted outside the worker)

The Break It cases are in test_adversarial.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import errors
from grader.exercises.attention_backward.judging import (blocks_above_diagonal, check_backward,
                                                         check_forward, reads_per_row, unpack)
from grader.exercises.attention_backward.mistakes import backward_hint, close
from grader.exercises.attention_backward.reference import (backward_reference, forward_reference,
                                                           qkv)
from grader.judge.answers.cases import Cases
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close, values
from grader.judge.answers.inputs import round_to
from grader.sandbox import memory
from grader.wire.codec import Trusted

MiB = 1 << 20
# (N, d, Br, Bc): N = 1, N < Br, N a multiple of neither block, Br < Bc and Br > Bc
# O(N d) temporaries the memory check allows, as N x d float64 arrays
TEMPORARIES = 6
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
    # N = 2 Br + 1: a last query block of one row on the diagonal; Br a multiple of Bc
    shapes = [(100, 32, 16, 16, "float64"), (33, 16, 16, 16, "float32"),
              (113, 64, 32, 48, "float32"), (77, 32, 24, 10, "float64"),
              (50, 16, 4, 12, "float32"), (45, 16, 12, 8, "float64"), (1, 16, 8, 8, "float64")]
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


@pytest.mark.check("attention_backward.causal_skips_blocks")
def test_causal_skips_blocks(student, rng):
    """Advice, no points (Check.advice): tiled_attention_lse(causal=True) gets Q and K as
    arrays that log which rows each read covers (grader/worker/read_recorder.py, rows kept). Key
    row 0 is read by every query block; a forward that skips the blocks above the diagonal
    reads the later key blocks in fewer query blocks, in proportion
    (judging.blocks_above_diagonal). The log is built in the student's process, where gc,
    frames and vars(module) reach it, so it teaches and pays nothing: causal_mask pays for the
    answer (docs/SECURITY.md). Not seen: K read whole into an ndarray first (np.asarray(K)),
    then sliced; a missing or malformed log: the advice then says the evidence was missing."""
    sub = student()
    for N, d, Br, Bc, dtype in ((64, 16, 16, 16, "float64"), (77, 32, 24, 10, "float32")):
        Q, K, V = qkv(rng, N, d, dtype)
        case = f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}, causal"
        what = f"tiled_attention_lse(Q, K, V, Br={Br}, Bc={Bc}, causal=True) ({case}) [seed {rng.seed}]"
        recorded = [Trusted("read_recorder", params={"values": X, "dtype": dtype, "keep_shape": True})
                    for X in (Q, K)]
        try:
            r = sub.call("tiled_attention_lse", *recorded, V, Br, Bc, causal=True)
        except errors.StudentRaised as e:
            raise CheckFailed(f"{what}: raised when given the grader's recording Q and K: {e}",
                              hint="Here Q and K are array-likes that log which rows are read "
                                   "(shape, dtype, slices K[j:j + Bc], .T, @, astype and NumPy "
                                   "functions work on them; isinstance(K, np.ndarray) is "
                                   "False).") from None
        O_ref, L_ref = forward_reference(Q, K, V, True)
        with answer_must_be_right("was recorded", ("attention_backward.causal_mask",)):
            O, L = unpack(r.value, what, 2)
            assert_close(O, O_ref, what=f"{what}: O", input_dtype=dtype, terms=N)
        logs = r.extras.get("reads")
        if not (isinstance(logs, list) and len(logs) == 2 and all(isinstance(x, dict) and
                x.get("n") == N and isinstance(x.get("ranges"), list) for x in logs)):
            raise CheckFailed(f"{what}: the grader got no readable record of how Q and K were "
                              f"read ({type(logs).__name__} {logs!r:.80}), so the skipped blocks "
                              f"cannot be seen; the evidence was missing, which is never a pass.")
        count = reads_per_row(logs[1])
        if count[0] == 0:
            raise CheckFailed(
                f"{what}: K was only read whole ({logs[1].get('whole_reads', 0)} whole-array "
                f"reads), so which key blocks each query block computed cannot be seen.",
                hint="Read K block by block, K[j:j + Bc], in the loop: the grader counts the "
                     "rows each read covers to see the blocks above the diagonal skipped.")
        over = blocks_above_diagonal(count, N, Br, Bc)
        if over:
            raise CheckFailed(
                f"{what}: key row 0 was read {count[0]} times (once per tile of every query "
                f"block), and key block(s) {over} (of {Bc} rows) up to {int(count.max())} times: "
                f"more than the query blocks that reach them allow. Blocks above the diagonal "
                f"were computed and masked, not skipped.",
                hint="FlashAttention-2 skips blocks that are fully masked out: when the key "
                     "block starts after the query block's last row (j > i + br - 1), stop the "
                     "key loop; every later block is above the diagonal too.")


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
    # the diagonal against the block edges every way: Br == Bc, Br < Bc, Br > Bc (a multiple
    # and not), a last query block of one row, short last blocks of both kinds
    for N, d, Br, Bc, dtype in ((64, 16, 16, 16, "float64"), (113, 64, 32, 48, "float32"),
                                (77, 32, 24, 10, "float64"), (33, 16, 16, 16, "float32"),
                                (45, 16, 12, 8, "float64"), (50, 16, 4, 12, "float64")):
        Q, K, V, dO = qkv(rng, N, d, dtype, 4)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_backward(sub, Q, K, V, dO, Br, Bc, True, "causal", rng.seed)
    cases.finish()


@pytest.mark.check("attention_backward.backward_finite_difference")
def test_backward_finite_difference(student, rng):
    """One entry in every row of dQ, dK, dV (its column at random) against central differences
    of loss = sum(O * dO), with O computed here in float64: the gradients are those of attention
    itself, whatever formulas produced them, and a single wrong row shows."""
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
            # one entry in every row: a single wrong row of any gradient shows
            for r in range(N):
                c = int(rng.integers(d))
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
                        hint=backward_hint(got, Q, K, V, O, L, dO, causal, Br, Bc))


# ------------------------------------------------------------------ memory

def _measured_call(sub, fn, args, what, case, seed):
    """fn(*args, causal=True) in a fresh worker, its peak memory counted from here
    (grader/sandbox/memory.py: the worker's cgroup, or VmHWM with VmRSS sampled), tracemalloc
    on in the worker for the message only: (result, the peak over a fresh worker's baseline).
    Where this machine has no outside count, it fails closed (memory.UNMEASURED)."""
    with memory.fresh_worker(sub) as fresh:
        baseline = memory.fresh_baseline(fresh)
        if baseline is None:   # no outside count on this machine: no evidence, no points
            raise CheckFailed(f"{what} ({case}) [seed {seed}]: {memory.UNMEASURED}.",
                              hint=memory.UNMEASURED_HINT, follows=())
        try:
            with memory.peak_rss(fresh) as rss:
                res = fresh.call(fn, *args, causal=True, opts={"tracemalloc": True})
        except memory.Unmeasurable as e:
            raise CheckFailed(f"{what} ({case}) [seed {seed}]: {e}, though a fresh "
                              f"worker's could be; the memory check fails closed.",
                              hint="Leave the process alone: no prctl, no changes to /proc.") from None
    return res, rss["bytes"] - baseline, rss["how"]


@pytest.mark.check("attention_backward.memory_is_linear")
def test_memory_is_linear(student, rng):
    """N = 1500, d = 16, Br = Bc = 16, causal: the forward and then the backward, each in a fresh
    worker, its peak memory counted from here (its cgroup, or VmHWM), as
    tiled_attention.memory_is_tiled measures. Anything N x N (a float32 score or probability
    matrix is 9 MB) is above the bound: the outputs, six N x d float64 temporaries, vectors of N
    and 4 MiB for the allocator and the reply (the solution peaks 0.7 and 1.7 MB above a fresh
    worker, every input in float64 up front 2.7 MB, one in-place float32 N x N 30 MB: cgroup
    and VmHWM alike). tracemalloc's peak is in the message only: it is the student's process's
    number (docs/SECURITY.md)."""
    sub = student()
    N, d, Br, Bc, dtype = 1500, 16, 16, 16, "float32"
    Q, K, V, dO = qkv(rng, N, d, dtype, 4)
    O_ref, L_ref = forward_reference(Q, K, V, True)
    O = round_to(O_ref, dtype)
    item = np.dtype(dtype).itemsize
    calls = [("tiled_attention_lse", (Q, K, V, Br, Bc), 2),
             ("tiled_backward", (Q, K, V, O, L_ref, dO, Br, Bc), 3)]
    for fn, args, n_out in calls:
        what = f"{fn}(..., Br={Br}, Bc={Bc}, causal=True)"
        case = f"N={N}, d={d}, {dtype}"
        res, resident, how = _measured_call(sub, fn, args, what, case, rng.seed)
        # every output counted as float64 (float32 input may give float64 gradients), and
        # O(N d) temporaries in any dtype: up to six N x d float64 arrays (every input
        # converted to float64 up front, dO * O for D), a few vectors of N
        outputs = n_out * N * d * 8
        temps = TEMPORARIES * N * d * 8
        bound = outputs + temps + 4 * N * 8 + 4 * MiB
        if resident > bound:
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: expected the worker's peak memory within "
                f"{bound} bytes of a fresh worker's (the outputs {outputs}, {TEMPORARIES} N x d "
                f"temporaries as float64 {temps}, a few vectors of N, 4 MiB), got {resident} "
                f"more (counted outside it by {how}; {memory.traced(res.extras)}); the N x N scores are "
                f"{N * N * item} bytes.",
                hint="Recompute instead of remember: S and P exist one (Br, Bc) tile at a time "
                     "in both passes, in any kind of memory; nothing N x N is built, kept or "
                     "prepared at import.",
                follows=())
        # memory first, then the values: the point needs the right answer from this call
        got = unpack(res.value, what, n_out)
        if fn == "tiled_attention_lse":
            names, want = ("O", "L"), (O_ref, L_ref)
        else:
            names, want = ("dQ", "dK", "dV"), backward_reference(Q, K, V, O, L_ref, dO, True)
        for name, g, w in zip(names, got, want):
            assert_close(g, w, what=f"{what}: {name}", input_dtype=dtype, terms=N, case=case,
                         seed=rng.seed)
