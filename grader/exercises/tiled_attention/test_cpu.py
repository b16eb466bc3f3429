"""cpu checks for exercises/tiled_attention.py (lesson: "From a sum to an output row",
"FlashAttention's forward pass" and the Measure note on memory).

Every check draws fresh inputs from `rng` (reference.py), rounds them to the dtype the student
receives, computes the float64 reference here, in the trusted process, and calls the student's
functions through the worker proxy (judging.py: every tiled call goes through the memory gate,
tiled_call). One idea per check:

  memory_is_tiled        nothing N x N in the worker's peak memory, counted outside it
  key_tiles              K and V read Bc rows at a time (advice, no points: a read log)
  naive_matches_float64  naive_attention on random inputs
  tiled_matches_float64  tiled_attention on sizes that are multiples of Br and Bc
  ragged_sizes           N = 1, N < Br, N a multiple of neither block, Br != Bc

Inputs of these three tiled checks put every row's max in the first key block, where the
running max stops moving, so a missing rescale by alpha fails only max_in_last_block (and the
checks grouped under it, test_adversarial.py), never the memory or the ragged-size checks. Any
float output is accepted (the policy is in grader/judge/answers/compare.py); an exception costs its
case's share.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.exercises.tiled_attention.judging import (MiB, check_naive, check_tiled, key_tiles,
                                                     tiled_call, unmeasured)
from grader.exercises.tiled_attention.reference import DTYPES, max_in_first_key, qkv
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, answer_must_be_right, assert_close, values
from grader.judge.answers.cases import Cases
from grader.sandbox import memory

# (N, d, Br, Bc): N = 1; N < Br; N a multiple of neither block; Br < Bc and Br > Bc. The last
# is the case whose N x N scores stand far above the memory gate's bound (tiled_call): at
# N = 1000, d = 64 they rose only 0.1-1.2 MB past it, less the inputs' and output's share, and
# a naive call there passed when the CPU layers ran side by side (docs/MEASUREMENTS.md)
RAGGED = [(1, 64, 32, 48), (17, 128, 32, 48), (113, 64, 32, 48), (203, 128, 64, 16),
          (1500, 16, 64, 16)]


@pytest.mark.check("tiled_attention.memory_is_tiled")
def test_memory_is_tiled(student, rng):
    """N = 2011 with Br = Bc = 16 and d = 16: N is much larger than a tile, so the N x N scores
    (16 MB in float32) stand far above everything a tiled call holds. The verdict rests on the
    worker's memory counted outside it, reset before the call and read by this process
    (grader/sandbox/memory.py: its cgroup, the whole process tree, or its VmHWM with VmRSS
    sampled): everything resident, an anonymous mmap and a child's memory included, against a
    fresh worker's baseline, so memory allocated at import counts. The call runs in a fresh
    worker of its own. tracemalloc runs beside it in the worker: its peak only explains a
    failure (it is the student's process's number, docs/SECURITY.md). Where this machine has
    no outside count (not Linux), the check fails closed and says so. What tiles themselves
    look like (K and V read Bc rows at a time, no row of N scores) is key_tiles' advice."""
    sub = student()
    N, d, Br, Bc, dtype = 2011, 16, 16, 16, "float32"
    Q, K, V = max_in_first_key(rng, N, d, dtype)
    what = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})"
    case = f"N={N}, d={d}, {dtype}"
    item = np.dtype(dtype).itemsize
    # a worker of its own, fresh: memory kept by earlier calls does not count, import does
    with memory.fresh_worker(sub) as fresh:
        baseline = memory.fresh_baseline(fresh)
        if baseline is None:   # no outside count on this machine: no evidence, no points
            raise unmeasured(what, case, rng.seed, follows=())
        try:
            with memory.peak_rss(fresh) as rss:
                res = fresh.call("tiled_attention", Q, K, V, Br=Br, Bc=Bc,
                                 opts={"tracemalloc": True})
        except memory.Unmeasurable as e:
            # a fresh worker's could be measured: the submission changed its own process
            raise CheckFailed(f"{what} ({case}) [seed {rng.seed}]: {e}, though a fresh worker's "
                              f"could be; the memory check fails closed.",
                              hint="Leave the process alone: no prctl, no changes to /proc.") from None
    # the output may be float64 for float32 input (the policy in grader/judge/answers/compare.py)
    output = N * d * max(item, np.asarray(values(res.value)).dtype.itemsize)
    # resident: the inputs as received and decoded, the output and its encoded reply, and
    # allocator slack; an N x N float32 matrix is 16.2 MB on top
    resident = rss["bytes"] - baseline
    rss_bound = 4 * (3 * N * d * item + output) + 6 * MiB
    if resident > rss_bound:
        # tracemalloc's peak says what the memory was, where it saw it (explanation only)
        peak = res.extras.get("peak_bytes")
        extra = peak - output if type(peak) is int else resident
        cause = ("about an N x N score matrix" if extra >= N * N * item // 2 else
                 "a copy of Q, K or V (N x d) or more" if extra >= N * d * item else
                 "more than a few tiles")
        raise CheckFailed(
            f"{what} ({case}) [seed {rng.seed}]: expected the worker's peak memory within "
            f"{rss_bound} bytes of a fresh worker's, got {resident} bytes more (counted outside "
            f"it by {rss['how']}: {rss['bytes']}, a fresh worker {baseline}): {cause}; "
            f"{memory.traced(res.extras)}. Memory that tracemalloc cannot see (an mmap, a buffer made at "
            f"import) counts too. The output is {output} bytes; one tile step "
            f"{8 * (Br * Bc + Br * d + Bc * d)} bytes; a copy of Q, K or V {N * d * item} bytes; "
            f"the N x N scores {N * N * item} bytes.",
            hint="Tiling: the N x N scores must not exist anywhere, in any kind of memory, "
                 "and nothing N x N may be prepared at import; one (Br, Bc) tile at a time.",
            follows=())   # memory is this check's own evidence: it leads, whatever else failed
    # memory first, then the values: a wrong output from tiled memory is the value checks' cause
    with answer_must_be_right("kept its memory tiled", ("tiled_attention.tiled_matches_float64",
                                                        "tiled_attention.ragged_sizes")):
        assert_close(res.value, reference.attention(Q, K, V), what=what, input_dtype=dtype,
                     terms=N, case=case, seed=rng.seed)


@pytest.mark.check("tiled_attention.key_tiles")
def test_key_tiles(student, rng):
    """Advice, no points (Check.advice): K and V read Bc rows at a time. A row of N scores
    fits in a few tiles' memory, so only the reads show it: K and V arrive as arrays that log
    the rows each NumPy operation reads (grader/worker/row_recorder.py, judging.key_tiles). The
    log is built in the student's process, where gc, frames and vars(module) reach it, so it
    teaches and pays nothing (docs/SECURITY.md). Smaller than memory_is_tiled's call
    (recording every read costs ~60 us; at N = 2011 that doubles the call); the memory gate
    and a right answer first, as in every tiled call."""
    sub = student()
    N, d, Br, Bc, dtype = 1000, 16, 32, 32, "float32"
    Q, K, V = max_in_first_key(rng, N, d, dtype)
    what = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})"
    case = f"N={N}, d={d}, {dtype}, K and V recorded"
    res = tiled_call(sub, Q, K, V, Br, Bc, what, case, rng.seed, record=True)
    with answer_must_be_right("read K and V", ("tiled_attention.tiled_matches_float64",
                                               "tiled_attention.ragged_sizes")):
        assert_close(res.value, reference.attention(Q, K, V), what=what, input_dtype=dtype,
                     terms=N, case=case, seed=rng.seed)
    key_tiles(res, N, Bc, what, case, rng.seed)


@pytest.mark.check("tiled_attention.naive_matches_float64")
def test_naive_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in DTYPES:
        for N, d in ((1, 64), (17, 128), (113, 64), (1000, 128)):
            Q, K, V = qkv(rng, N, d, dtype)
            with cases.case(f"N={N}, d={d}, {dtype}", seed=rng.seed):
                check_naive(sub, Q, K, V, "random", rng.seed)
    cases.finish()


@pytest.mark.check("tiled_attention.tiled_matches_float64")
def test_tiled_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # N a multiple of Br and of Bc: no short blocks here (ragged_sizes has them)
    # (N = 1024, d = 16 with blocks of 32: the N x N scores are 7x what the memory gate allows
    # a tiled call, so it can tell an untiled call apart; see tiled_call)
    for dtype, N, d, Br, Bc in (("float32", 1024, 16, 32, 32), ("float32", 192, 32, 32, 64),
                                ("float64", 128, 64, 64, 32)):
        Q, K, V = max_in_first_key(rng, N, d, dtype)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_tiled(sub, Q, K, V, Br, Bc, "random", rng.seed)
    cases.finish()


@pytest.mark.check("tiled_attention.ragged_sizes")
def test_ragged_sizes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for N, d, Br, Bc in RAGGED:
        Q, K, V = max_in_first_key(rng, N, d, "float32")
        with cases.case(f"N={N}, d={d}, float32, Br={Br}, Bc={Bc}", seed=rng.seed):
            check_tiled(sub, Q, K, V, Br, Bc, "random", rng.seed)
    # the default blocks (Br = Bc = 64), with a short last block
    Q, K, V = max_in_first_key(rng, 130, 64, "float32")
    with cases.case("N=130, d=64, float32, default Br and Bc", seed=rng.seed):
        out = tiled_call(sub, Q, K, V, None, None, "tiled_attention(Q, K, V)",
                         "N=130, d=64, float32, default Br and Bc", rng.seed)
        assert_close(out, reference.attention(Q, K, V),
                     what="tiled_attention(Q, K, V) with the default Br, Bc", input_dtype="float32",
                     terms=130, case="N=130, d=64, float32", seed=rng.seed)
    cases.finish()

