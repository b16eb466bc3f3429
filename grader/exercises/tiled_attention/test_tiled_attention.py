"""Checks for exercises/tiled_attention.py (lesson: "From a sum to an output row",
"FlashAttention's forward pass", Break It 2 and the Measure note on memory).

Every check draws fresh inputs from `rng`, rounds them to the dtype the student receives,
computes the float64 reference here, in the trusted process, and calls the student's functions
through the worker proxy. One idea per check:

  memory_is_tiled        peak memory relative to the tile (tracemalloc and the worker's RSS)
  naive_matches_float64  naive_attention on random inputs
  tiled_matches_float64  tiled_attention on sizes that are multiples of Br and Bc
  ragged_sizes           N = 1, N < Br, N a multiple of neither block, Br != Bc
  max_in_last_block      Break It 2: the row max moves into the last key block (alpha)
  large_scores           scores that overflow exp without the max subtracted
  negative_scores        rows whose scores are all far below 0 (the running max starts at -inf)

Inputs of the first three tiled checks put every row's max in the first key block, where the
running max stops moving, so a missing rescale by alpha fails only max_in_last_block (and the
checks grouped under it), never the memory or the ragged-size checks. Any float output is
accepted (the policy is in grader/judge/compare.py); an exception costs its case's share.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import diagnose, reference
from grader.sandbox import memory
from grader.judge.compare import Cases, CheckFailed, assert_close, values
from grader.judge.inputs import randn

DTYPES = ("float32", "float64")
# (N, d, Br, Bc): N = 1; N < Br; N a multiple of neither block; Br < Bc and Br > Bc
RAGGED = [(1, 64, 32, 48), (17, 128, 32, 48), (113, 64, 32, 48), (203, 128, 64, 16),
          (1000, 64, 64, 16)]
KiB, MiB = 1 << 10, 1 << 20


def _qkv(rng, N: int, d: int, dtype: str, scale: float = 1.0):
    """Fresh (Q, K, V), each (N, d), standard normal * scale, exact in dtype."""
    return tuple(randn(rng, (N, d), dtype, scale) for _ in range(3))


def _max_in_first_key(rng, N: int, d: int, dtype: str, boost: float = 4.0):
    """(Q, K, V) whose every row's largest score is the one against key 0, by `boost` or more.

    Q and K have entries in {-1, 0, 1} (scores spread ~0.66 around 0); key 0 is boost * sqrt(d)
    along dimension 0, where every query has 1, and 0 elsewhere, so its score is `boost` in every
    row. The running max then never moves after the first key block: alpha = 1 from there on.
    Key 0 still holds only a few percent of each row's weight, so every key counts."""
    for _ in range(20):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        Q[:, 0], K[:, 0] = 1.0, 0.0
        K[0] = 0.0
        K[0, 0] = boost * np.sqrt(d)
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        s = (Q.astype(np.float64) @ K.T.astype(np.float64))
        if N == 1 or (s[:, 0:1] > s[:, 1:]).all():
            return Q, K, V
    raise RuntimeError("could not draw inputs with every row's max at key 0")


MEMORY = "tiled_attention.memory_is_tiled"


def _tile_step(d: int, Br: int, Bc: int) -> int:
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
    tile = _tile_step(d, Br, Bc)
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


def _tiled(sub, Q, K, V, Br: int, Bc: int, case: str, seed: int):
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


def _blew_up(e: CheckFailed) -> bool:
    """The failure is NaN or inf where the reference is finite: the evidence of exp overflowing
    or of a row sum of 0. A finite wrong answer points elsewhere (the hint then says so)."""
    return "got NaN" in str(e) or "overflowed" in str(e)


OFF_BUT_FINITE = ("The output is finite but wrong here, so exp did not overflow or underflow: "
                  "the checks above (the block rule, alpha, ragged sizes) say what differs.")


def _naive(sub, Q, K, V, case: str, seed: int):
    out = sub.naive_attention(Q, K, V)
    try:
        assert_close(out, reference.attention(Q, K, V),
                     what="naive_attention(Q, K, V)", input_dtype=Q.dtype.name, terms=Q.shape[0],
                     case=f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}", seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=diagnose.attention_hint(
            out, Q, K, V, input_dtype=Q.dtype.name) or e.hint) from None


@pytest.mark.check("tiled_attention.memory_is_tiled")
def test_memory_is_tiled(student, rng):
    """N = 2011 with Br = Bc = 16 and d = 16: N is much larger than a tile, so a strip of N
    scores per row (one row at a time, K @ q), a Br x N strip or a copy of Q, K or V costs far
    more than the tiles do. Two measurements, one call:
      tracemalloc in the worker: Python and NumPy allocations (evidence from inside);
      VmHWM of the worker, reset before the call and read by this process (grader/judge/memory.py):
      everything resident, an anonymous mmap included, against a fresh worker's baseline, so
      memory allocated at import counts. The call runs in a fresh worker of its own."""
    sub = student()
    N, d, Br, Bc, dtype = 2011, 16, 16, 16, "float32"
    Q, K, V = _max_in_first_key(rng, N, d, dtype)
    what = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})"
    case = f"N={N}, d={d}, {dtype}"
    item = np.dtype(dtype).itemsize
    # a worker of its own, fresh: memory kept by earlier calls does not count, import does
    with memory.fresh_worker(sub) as fresh:
        baseline = memory.fresh_baseline(fresh)
        try:
            with memory.peak_rss(fresh) if baseline is not None else _nothing() as rss:
                res = fresh.call("tiled_attention", Q, K, V, Br=Br, Bc=Bc,
                                 opts={"tracemalloc": True})
        except memory.Unmeasurable as e:
            # a fresh worker's could be measured: the submission changed its own process
            raise CheckFailed(f"{what} ({case}) [seed {rng.seed}]: {e}, though a fresh worker's "
                              f"could be; the memory check fails closed.",
                              hint="Leave the process alone: no prctl, no changes to /proc.") from None
    # the output may be float64 for float32 input (the policy in grader/judge/compare.py)
    output = N * d * max(item, np.asarray(values(res.value)).dtype.itemsize)
    # the tiles of one step, each counted as float64 (a float32 input may be widened per tile):
    # the (Br, Bc) scores, the (Br, d) acc and q, the (Bc, d) k and v
    tile = 8 * (Br * Bc + Br * d + Bc * d)
    bound = output + 4 * tile + 8 * KiB
    peak = int(res.extras.get("peak_bytes", 0))
    sizes = (f"The output is {output} bytes; one tile step {tile} bytes; a strip of N scores "
             f"per row {N * item} bytes (a Br x N strip {Br * N * item}); a copy of Q, K or V "
             f"{N * d * item} bytes; the N x N scores {N * N * item} bytes.")
    if peak > bound:
        extra = peak - output
        cause = ("about an N x N score matrix" if extra >= N * N * item // 2 else
                 "a copy of Q, K or V (N x d) or more" if extra >= N * d * item else
                 "strips of N scores: Br and Bc must bound every score array" if extra >= N * item else
                 "more than a few tiles")
        raise CheckFailed(
            f"{what} ({case}) [seed {rng.seed}]: expected peak memory under {bound} bytes "
            f"(the output + 4 tile steps + 8 KiB), got {peak} bytes as tracemalloc saw it: "
            f"{extra} bytes beyond the output, {cause}. {sizes}",
            hint="Tiling: build one (Br, Bc) score tile at a time from q = Q[i:i+Br] and "
                 "k = K[j:j+Bc]; never the N x N scores, a whole row of N scores, a Br x N "
                 "strip, or a copy of Q, K or V. The only N-sized array is the output.",
            follows=())   # memory is this check's own evidence: it leads, whatever else failed
    # memory first, then the values: a wrong output from tiled memory is the value checks' cause
    assert_close(res.value, reference.attention(Q, K, V), what=what, input_dtype=dtype, terms=N,
                 case=case, seed=rng.seed)
    if peak < output:  # the output itself is allocated during the call
        raise CheckFailed(
            f"{what} ({case}) [seed {rng.seed}]: tracemalloc saw a peak of {peak} bytes, less "
            f"than the N x d output itself ({output} bytes): compute with NumPy arrays "
            f"allocated in the call, and leave tracemalloc alone.")
    if baseline is not None:
        # resident: the inputs as received and decoded, the output and its encoded reply, and
        # allocator slack; an N x N float32 matrix is 16.2 MB on top
        resident = rss["bytes"] - baseline
        rss_bound = 4 * (3 * N * d * item + output) + 6 * MiB
        if resident > rss_bound:
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: expected the worker's peak resident memory "
                f"within {rss_bound} bytes of a fresh worker's, got {resident} bytes more "
                f"(VmHWM {rss['bytes']}, fresh worker {baseline}; tracemalloc saw only {peak}). "
                f"Memory that tracemalloc cannot see (an mmap, a buffer made at import) counts "
                f"too. {sizes}",
                hint="Tiling: the N x N scores must not exist anywhere, in any kind of memory, "
                     "and nothing N x N may be prepared at import; one (Br, Bc) tile at a time.",
                follows=())


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.mark.check("tiled_attention.naive_matches_float64")
def test_naive_matches_float64(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for dtype in DTYPES:
        for N, d in ((1, 64), (17, 128), (113, 64), (1000, 128)):
            Q, K, V = _qkv(rng, N, d, dtype)
            with cases.case(f"N={N}, d={d}, {dtype}", seed=rng.seed):
                _naive(sub, Q, K, V, "random", rng.seed)
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
        Q, K, V = _max_in_first_key(rng, N, d, dtype)
        with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
            _tiled(sub, Q, K, V, Br, Bc, "random", rng.seed)
    cases.finish()


@pytest.mark.check("tiled_attention.ragged_sizes")
def test_ragged_sizes(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    for N, d, Br, Bc in RAGGED:
        Q, K, V = _max_in_first_key(rng, N, d, "float32")
        with cases.case(f"N={N}, d={d}, float32, Br={Br}, Bc={Bc}", seed=rng.seed):
            _tiled(sub, Q, K, V, Br, Bc, "random", rng.seed)
    # the default blocks (Br = Bc = 64), with a short last block
    Q, K, V = _max_in_first_key(rng, 130, 64, "float32")
    with cases.case("N=130, d=64, float32, default Br and Bc", seed=rng.seed):
        out = tiled_call(sub, Q, K, V, None, None, "tiled_attention(Q, K, V)",
                         "N=130, d=64, float32, default Br and Bc", rng.seed)
        assert_close(out, reference.attention(Q, K, V),
                     what="tiled_attention(Q, K, V) with the default Br, Bc", input_dtype="float32",
                     terms=130, case="N=130, d=64, float32", seed=rng.seed)
    cases.finish()


@pytest.mark.check("tiled_attention.max_in_last_block")
def test_max_in_last_block(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # (N, d, Br, Bc): the last key block is short (8, 1 and 40 keys)
    for dtype in DTYPES:
        for N, d, Br, Bc in ((200, 64, 32, 48), (113, 128, 64, 16), (1000, 64, 64, 64)):
            # Q and K with entries in {-1, 0, 1}: scores ~ N(0, 0.67^2). Every query gets 1 as
            # its first coordinate and the last few keys (all in the last key block) about
            # 10 * sqrt(d) on theirs, so their scores rise by 10: every row's max appears only
            # in the last block, where alpha ~ e^-8. Random data alone mostly hides a missing
            # rescale of acc; this makes it loud. Integer Q and K keep q . k exact in float32.
            Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
            boosted = min(3, N - (N - 1) // Bc * Bc)
            Q[:, 0] = 1.0
            K[-boosted:, 0] += round(10 * np.sqrt(d))
            Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
            with cases.case(f"N={N}, d={d}, {dtype}, Br={Br}, Bc={Bc}", seed=rng.seed):
                try:
                    _tiled(sub, Q, K, V, Br, Bc,
                           f"Br={Br}, Bc={Bc}, row max in the last key block (last {boosted} keys)",
                           rng.seed)
                except CheckFailed as e:
                    if e.follows is not None:   # the memory gate's failure, as it is
                        raise
                    raise CheckFailed(str(e), hint=e.hint or "Break It 2: right until the row max moves into "
                                      "a later key block. Is acc rescaled by alpha = "
                                      "exp(m - m_new), as l is?") from None
    cases.finish()


@pytest.mark.check("tiled_attention.large_scores")
def test_large_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # float32 exp overflows above 88.7, float64 above 709.8. Integer Q and K with d = 64 make
    # every score an exact multiple of 1/8 (scale = 1/8), so float32 loses nothing to rounding
    # the scores and the usual tolerance holds at scores in the hundreds.
    N, d, Br, Bc = 600, 64, 64, 48   # float64: N x N is 2x what the memory gate allows
    hint = ("Subtract the max before exp: the running max m_new in tiled_attention and each "
            "row's max in naive_attention; p = exp(s - m), never exp(s).")
    for dtype, spread, offset in (("float32", 16, 64), ("float64", 64, 128)):
        # (a) spread: entries in [-spread, spread] give scores with a standard deviation of
        # spread * (spread + 1) / 3 (~90 in float32, ~1400 in float64): row maxima ~250, ~4000
        Q, K = (rng.integers(-spread, spread + 1, (N, d)).astype(dtype) for _ in range(2))
        V = randn(rng, (N, d), dtype)
        inputs = [(Q, K, V, f"integer Q, K in [-{spread}, {spread}]")]
        # (b) shifted: every score near offset^2 / 8 (512 in float32, 2048 in float64) with a
        # spread of ~2, so each row still averages many values
        Q, K = (rng.integers(-2, 3, (N, d)).astype(dtype) for _ in range(2))
        Q[:, 0] = K[:, 0] = offset
        inputs.append((Q, K, V, f"every score near {offset * offset // 8}"))
        for Q, K, V, case in inputs:
            for fn in (_tiled, _naive):
                with cases.case(f"{fn.__name__[1:]}_attention, N={N}, d={d}, {dtype}, {case}",
                                seed=rng.seed):
                    try:
                        fn(sub, Q, K, V, *((Br, Bc) if fn is _tiled else ()), case, rng.seed)
                    except CheckFailed as e:
                        if e.follows is not None:   # the memory gate's failure, as it is
                            raise
                        raise CheckFailed(str(e), hint=hint if _blew_up(e) else e.hint or OFF_BUT_FINITE) from None
    cases.finish()


@pytest.mark.check("tiled_attention.negative_scores")
def test_negative_scores(student, rng, credit):
    sub = student()
    cases = Cases(credit)
    # Every score of row i is near -o_i: Q[i, 0] = sqrt(d) * o_i against K[:, 0] = -1, the other
    # coordinates in {-1, 0, 1} (spread ~0.66). With o_i from 22 to 140 in float32 (exp
    # underflows below -103) and from 700 to 1100 in float64 (below -745), exp(s - 0) is 0 or
    # subnormal in many rows: a running max that starts at 0, or no max at all, gives l = 0
    # and NaN there. exp(s - m) with the row's own max is 1 at the max, whatever the scores.
    N, d, Br, Bc = 513, 64, 32, 48   # float64: N x N is 1.7x what the memory gate allows
    hints = {_tiled: "Start the running max at -inf (m = np.full(br, -np.inf)), not at 0: when "
                     "every score is far below 0, exp(s - 0) underflows to 0, l stays 0 and "
                     "acc / l is NaN.",
             _naive: "Safe softmax: subtract each row's own max before exp; without it, scores "
                     "far below 0 underflow to 0 and the row sum is 0."}
    for dtype, low, high in (("float32", 22, 140), ("float64", 700, 1100)):
        Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
        Q[:, 0] = np.sqrt(d) * rng.integers(low, high + 1, N)
        K[:, 0] = -1.0
        Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
        case = f"every score of each row between -{high} and -{low}"
        for fn in (_tiled, _naive):
            with cases.case(f"{fn.__name__[1:]}_attention, N={N}, d={d}, {dtype}, {case}",
                            seed=rng.seed):
                try:
                    fn(sub, Q, K, V, *((Br, Bc) if fn is _tiled else ()), case, rng.seed)
                except CheckFailed as e:
                    if e.follows is not None:   # the memory gate's failure, as it is
                        raise
                    raise CheckFailed(str(e), hint=hints[fn] if _blew_up(e) else e.hint or OFF_BUT_FINITE) from None
    cases.finish()
