"""Checks for exercises/tiled_attention.py (lesson: "From a sum to an output row",
"FlashAttention's forward pass", Break It 2 and the Measure note on tracemalloc).

Every check draws fresh inputs from `rng`, rounds them to the dtype the student receives,
computes the float64 reference here, in the trusted process, and calls the student's functions
through the worker proxy. Sizes are awkward on purpose: N = 1, N < Br, N not a multiple of Br
or Bc, Br != Bc, d = 64 and 128, float32 and float64 (the output must keep the input's dtype).
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.judge import reference
from grader.judge.compare import CheckFailed, assert_close
from grader.judge.inputs import randn, round_to

DTYPES = ("float32", "float64")
# (N, d, Br, Bc): N = 1; N < Br; N a multiple of neither block; Br < Bc and Br > Bc
RAGGED = [(1, 64, 32, 48), (17, 128, 32, 48), (113, 64, 32, 48), (203, 128, 64, 16),
          (1000, 64, 64, 16)]
MiB = 1 << 20


def _qkv(rng, N: int, d: int, dtype: str, scale: float = 1.0):
    """Fresh (Q, K, V), each (N, d), standard normal * scale, exact in dtype."""
    return tuple(randn(rng, (N, d), dtype, scale) for _ in range(3))


def _tiled(sub, Q, K, V, Br: int, Bc: int, ref, case: str, seed: int):
    """Call tiled_attention and compare with the float64 reference `ref`."""
    dtype = Q.dtype.name
    out = sub.tiled_attention(Q, K, V, Br=Br, Bc=Bc)
    assert_close(out, ref, what=f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})", dtype=dtype,
                 case=f"N={Q.shape[0]}, d={Q.shape[1]}, {dtype}, {case}", seed=seed)


@pytest.mark.check("tiled_attention.naive_matches_float64")
def test_naive_matches_float64(student, rng):
    sub = student()
    for dtype in DTYPES:
        for N, d in ((1, 64), (17, 128), (113, 64), (1000, 128)):
            Q, K, V = _qkv(rng, N, d, dtype)
            assert_close(sub.naive_attention(Q, K, V), reference.attention(Q, K, V),
                         what="naive_attention(Q, K, V)", dtype=dtype,
                         case=f"N={N}, d={d}, {dtype}", seed=rng.seed)


@pytest.mark.check("tiled_attention.ragged_sizes")
def test_ragged_sizes(student, rng):
    sub = student()
    for dtype in DTYPES:
        for N, d, Br, Bc in RAGGED:
            Q, K, V = _qkv(rng, N, d, dtype)
            _tiled(sub, Q, K, V, Br, Bc, reference.attention(Q, K, V), "random", rng.seed)
    # the default blocks (Br = Bc = 64), with a short last block
    Q, K, V = _qkv(rng, 130, 64, "float32")
    assert_close(sub.tiled_attention(Q, K, V), reference.attention(Q, K, V),
                 what="tiled_attention(Q, K, V) with the default Br, Bc", dtype="float32",
                 case="N=130, d=64, float32", seed=rng.seed)


@pytest.mark.check("tiled_attention.memory_is_tiled")
def test_memory_is_tiled(student, rng):
    sub = student()
    # N = 2011 is a multiple of no block size. Br = 512, Bc = 48 makes a Br x N strip of
    # scores (one query block against all keys at once) fail too.
    N, d, dtype = 2011, 64, "float32"
    Q, K, V = _qkv(rng, N, d, dtype)
    expected = reference.attention(Q, K, V)
    for Br, Bc in ((64, 64), (512, 48)):
        res = sub.call("tiled_attention", Q, K, V, Br=Br, Bc=Bc, opts={"tracemalloc": True})
        what = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})"
        case = f"N={N}, d={d}, {dtype}"
        assert_close(res.value, expected, what=what, dtype=dtype, case=case, seed=rng.seed)
        item = np.dtype(dtype).itemsize
        peak = int(res.extras["peak_bytes"])
        # A tiled solution allocates the N x d output plus a few Br x Bc and Br x d temporaries:
        # the reference solution peaks at 1.15 x N*d*itemsize. The bound allows four N x d arrays
        # (the output, a float64 copy of Q or a transposed K) and four tiles (float64 tiles
        # count twice), plus 1 MiB for NumPy's small arrays: 3.2 and 3.5 MB here, where the N x N
        # scores alone are 16.2 MB and a 512 x N strip 4.1 MB.
        bound = 4 * (Br * Bc + N * d) * item + MiB
        nxn, output = N * N * item, N * d * item
        if peak > bound:
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: expected peak memory under {bound} bytes "
                f"({bound / 1e6:.1f} MB = 4 * (Br*Bc + N*d) * {item} + 1 MiB), got {peak} bytes "
                f"({peak / 1e6:.1f} MB, as tracemalloc saw it). The N x N score matrix alone would "
                f"be {nxn} bytes ({nxn / 1e6:.1f} MB) and a Br x N strip of scores "
                f"{Br * N * item} bytes ({Br * N * item / 1e6:.1f} MB); the output is "
                f"{output} bytes ({output / 1e6:.1f} MB), and a tiled solution needs little "
                f"beyond it (no N x N scores, no Br x N strips, no copies of Q, K, V).")
        if peak < output:  # the output itself is allocated during the call
            raise CheckFailed(
                f"{what} ({case}) [seed {rng.seed}]: tracemalloc saw a peak of {peak} bytes, less "
                f"than the N x d output itself ({output} bytes): compute with NumPy arrays "
                f"allocated in the call, and leave tracemalloc alone.")


@pytest.mark.check("tiled_attention.max_in_last_block")
def test_max_in_last_block(student, rng):
    sub = student()
    # (N, d, Br, Bc): the last key block is short (8, 1 and 40 keys)
    for dtype in DTYPES:
        for N, d, Br, Bc in ((200, 64, 32, 48), (113, 128, 64, 16), (1000, 64, 64, 64)):
            # Q and K with entries in {-1, 0, 1}: scores ~ N(0, 0.67^2). Every query gets 1 as
            # its first coordinate and the last few keys (all in the last key block) about
            # 10 * sqrt(d) on theirs, so their scores rise by 10: every row's max appears only
            # in the last block, where alpha ~ e^-8. Random data alone mostly hides a missing
            # rescale of acc; this makes it loud. Integer Q and K keep q . k exact in float32,
            # so scores near 10 lose nothing to rounding in the dot products.
            Q, K = (rng.integers(-1, 2, (N, d)).astype(np.float64) for _ in range(2))
            boosted = min(3, N - (N - 1) // Bc * Bc)
            Q[:, 0] = 1.0
            K[-boosted:, 0] += round(10 * np.sqrt(d))
            Q, K, V = Q.astype(dtype), K.astype(dtype), randn(rng, (N, d), dtype)
            _tiled(sub, Q, K, V, Br, Bc, reference.attention(Q, K, V),
                   f"row max in the last key block (last {boosted} keys)", rng.seed)


@pytest.mark.check("tiled_attention.large_scores")
def test_large_scores(student, rng):
    sub = student()
    # float32 exp overflows above 88.7, float64 above 709.8. Integer Q and K with d = 64 make
    # every score an exact multiple of 1/8 (scale = 1/8), so float32 loses nothing to rounding
    # the scores and the usual tolerance holds at scores in the hundreds.
    N, d, Br, Bc = 300, 64, 64, 48
    for dtype, spread, offset in (("float32", 16, 64), ("float64", 64, 128)):
        # (a) spread: entries in [-spread, spread] give scores with a standard deviation of
        # spread * (spread + 1) / 3 (~90 in float32, ~1400 in float64): row maxima ~250, ~4000
        Q, K = (rng.integers(-spread, spread + 1, (N, d)).astype(dtype) for _ in range(2))
        V = randn(rng, (N, d), dtype)
        _tiled(sub, Q, K, V, Br, Bc, reference.attention(Q, K, V),
               f"integer Q, K in [-{spread}, {spread}]", rng.seed)
        # (b) shifted: every score near offset^2 / 8 (512 in float32, 2048 in float64) with a
        # spread of ~2, so each row still averages many values
        Q, K = (rng.integers(-2, 3, (N, d)).astype(dtype) for _ in range(2))
        Q[:, 0] = K[:, 0] = offset
        _tiled(sub, Q, K, V, Br, Bc, reference.attention(Q, K, V),
               f"every score near {offset * offset // 8}", rng.seed)
    # float64 random data scaled so scores reach the thousands
    Q, K, V = _qkv(rng, 203, 128, "float64", 30.0)
    _tiled(sub, Q, K, V, 32, 64, reference.attention(Q, K, V), "Q, K ~ N(0, 30^2)", rng.seed)
