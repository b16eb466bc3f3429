# BEGIN SOLUTION
"""Tiled attention in NumPy: FlashAttention's forward pass without the GPU (reference).

Lesson sections "From a sum to an output row" and "FlashAttention's forward pass"; this is the
second Build It file, tiled_attention.py.

    naive_attention  builds the full N x N score matrix, safe softmax, @ V: memory grows as N^2
    tiled_attention  the same answer one Br x Bc tile of scores at a time, with a running max m,
                     sum l and unnormalised output acc per query row: memory grows as N

Run:
    python solutions/tiled_attention.py         # self-check on awkward sizes, then N^2 vs N memory
    make check EX=tiled_attention               # the grader's checks for this exercise
"""
import time
# END SOLUTION
# BEGIN STUB
# """Tiled attention in NumPy: FlashAttention's forward pass without the GPU.
#
# Lesson sections "From a sum to an output row" and "FlashAttention's forward pass"; this is the
# second Build It file, tiled_attention.py. Write two functions:
#
#     naive_attention  builds the full N x N score matrix, safe softmax, @ V: memory grows as N^2
#     tiled_attention  the same answer one Br x Bc tile of scores at a time, with a running max m,
#                      sum l and unnormalised output acc per query row: memory grows as N
#
# Run:
#     python exercises/tiled_attention.py         # self-check and memory table (raises until done)
#     make check EX=tiled_attention               # the grader's checks for this exercise
# """
# import time
# END STUB
import tracemalloc

import numpy as np


def naive_attention(Q, K, V):
    """Q, K, V: (N, d). Build the full N x N score matrix, safe softmax, @ V.

    Args:
        Q: (N, d) float32 or float64, the queries.
        K: (N, d) same dtype, the keys.
        V: (N, d) same dtype, the values.
    Returns:
        (N, d) same dtype as Q: softmax(Q K^T / sqrt(d)) V, row by row.
    """
    # BEGIN SOLUTION
    d = Q.shape[1]
    S = Q @ K.T                               # (N, N): the matrix tiled_attention never builds
    S *= 1.0 / np.sqrt(d)                     # in place: a second N x N array would double the peak
    S -= S.max(axis=1, keepdims=True)         # safe softmax: every exponent <= 0
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)         # S now holds P, the probabilities
    return (S @ V).astype(Q.dtype, copy=False)

    # END SOLUTION
    # BEGIN STUB
    # # TODO(tiled_attention): roughly 4 lines.
    # #   S = Q K^T / sqrt(d)                     (N, N)
    # #   subtract each row's max, exponentiate, divide by each row's sum   (the safe softmax)
    # #   return P @ V, in Q's dtype
    # raise NotImplementedError("TODO(tiled_attention): naive_attention - full N x N scores, safe softmax per row, @ V")
    # END STUB


def tiled_attention(Q, K, V, Br=64, Bc=64):
    # BEGIN SOLUTION
    """Same result, never building anything bigger than Br x Bc.
    Outer loop over query blocks of Br rows; inner loop over key/value blocks of Bc rows.
    Keep m (Br,), l (Br,), acc (Br, d) for the current query block.

    Args:
        Q: (N, d) float32 or float64, the queries; any N >= 1 (need not be a multiple of Br, Bc).
        K: (N, d) same dtype, the keys.
        V: (N, d) same dtype, the values.
        Br: rows per query block (one GPU program's share of Q).
        Bc: rows per key/value block (one step of the inner loop).
    Returns:
        (N, d) same dtype as Q, equal to naive_attention(Q, K, V) up to rounding. The largest
        temporary is one (Br, Bc) score tile; the only N-sized array is the output.
    """
    N, d = Q.shape
    scale = 1.0 / np.sqrt(d)
    O = np.empty_like(Q)
    # The scale as a scalar of the tiles' dtype: multiplying a float32 tile in place by a float64
    # scalar makes NumPy allocate a conversion buffer bigger than the tile.
    scale = Q.dtype.type(scale)
    for i in range(0, N, Br):
        q = Q[i:i + Br]                       # (br, d), br <= Br: the last block may be short
        m = np.full(q.shape[0], -np.inf)      # (br,) running row max
        l = np.zeros(q.shape[0])              # (br,) running sum of exp(s - m)
        acc = np.zeros_like(q)                # (br, d) running sum of exp(s - m) * v
        for j in range(0, N, Bc):
            k, v = K[j:j + Bc], V[j:j + Bc]   # (bc, d) views, no copy
            s = q @ k.T                       # (br, bc) scores: the one tile we ever hold
            s *= scale                        # in place, like every op on s below: one tile only
            m_new = np.maximum(m, s.max(axis=1))  # (br,)
            # alpha < 1 where a row's max moved into this block: it shrinks everything summed so
            # far to the new max (Break It 2: drop it on acc and the output goes wrong).
            alpha = np.exp(m - m_new)         # (br,); exp(-inf) = 0 on the first block
            # m and l are float64: cast the (br,) factors to the tile dtype before they touch a
            # tile, for the same reason as the scale. The cast of m_new is exact: it came from s.
            s -= m_new.astype(s.dtype)[:, None]
            p = np.exp(s, out=s)              # (br, bc) weights in (0, 1], reusing s's memory
            l = l * alpha + p.sum(axis=1)
            acc *= alpha.astype(acc.dtype)[:, None]
            acc += p @ v                      # (br, bc) @ (bc, d) -> (br, d)
            m = m_new
        # Normalise once per row, at the end (as FA-2 does), not once per block.
        O[i:i + Br] = acc / l.astype(acc.dtype)[:, None]
    return O


    # END SOLUTION
    # BEGIN STUB
    # """Same result, never building anything bigger than Br x Bc.
    # Outer loop over query blocks of Br rows; inner loop over key/value blocks of Bc rows.
    # Keep m (Br,), l (Br,), acc (Br, d) for the current query block.
    #
    # Args:
    #     Q: (N, d) float32 or float64, the queries; any N >= 1 (need not be a multiple of Br, Bc).
    #     K: (N, d) same dtype, the keys.
    #     V: (N, d) same dtype, the values.
    #     Br: rows per query block (one GPU program's share of Q).
    #     Bc: rows per key/value block (one step of the inner loop).
    # Returns:
    #     (N, d) same dtype as Q, equal to naive_attention(Q, K, V) up to rounding. The largest
    #     temporary may be one (Br, Bc) score tile; the only N-sized array is the output: no copy
    #     of Q, K or V, no row of N scores (the grader measures peak memory with tracemalloc and
    #     the worker's resident memory, at N much larger than Br and Bc).
    # """
    # N, d = Q.shape
    # scale = 1.0 / np.sqrt(d)
    # O = np.empty_like(Q)
    # for i in range(0, N, Br):
    #     q = Q[i:i + Br]
    #     m = np.full(len(q), -np.inf)
    #     l = np.zeros(len(q))
    #     acc = np.zeros_like(q)
    #     for j in range(0, len(K), Bc):
    #         # TODO(tiled_attention): roughly 8 lines: scores, new max, p, alpha, update l and acc,
    #         # m = m_new. The lesson's block rule, for the key/value rows j:j + Bc:
    #         #   s_blk = q K_blk^T * scale               (br, bc): the only tile you build
    #         #   m_new = max(m, row max of s_blk)
    #         #   p     = e^(s_blk - m_new)               one column of m_new per row
    #         #   alpha = e^(m - m_new)                   the rescale factor, (br,)
    #         #   l     = l * alpha + row sum of p
    #         #   acc   = acc * alpha + p @ V_blk         (Break It 2: forget alpha here)
    #         # The last block may be shorter than Bc, and q shorter than Br: slice, don't assume.
    #         raise NotImplementedError("TODO(tiled_attention): tiled_attention - inner loop body: scores, new max, p, alpha, update l and acc, m = m_new")
    #     O[i:i + Br] = ...  # TODO(tiled_attention): roughly 1 line: normalise acc by l, row by row
    # return O
    # END STUB


def _inputs(rng, N, d, dtype=np.float32):
    """Fresh (Q, K, V), each (N, d) standard normal in dtype."""
    return tuple(rng.standard_normal((N, d)).astype(dtype) for _ in range(3))


def _max_in_last_block(rng, N, d, dtype=np.float32):
    """Inputs whose largest score in every row falls among the last keys (Break It 2).

    Every query gets +1 on dimension 0 and the last 3 keys get +8 * sqrt(d) there, which adds
    about 8 to those scores after the 1/sqrt(d) scale. So each row's max only appears in the last
    key block, and the output is wrong unless acc is rescaled by alpha.
    """
    Q, K, V = _inputs(rng, N, d, dtype)
    Q[:, 0] = 1.0
    K[-3:, 0] += 8.0 * np.sqrt(d)
    return Q, K, V


def _peak_bytes(fn, *args):
    """Peak bytes NumPy allocated during fn(*args), as tracemalloc sees them."""
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


if __name__ == "__main__":
    rng = np.random.default_rng(0)

    # 1. Correctness first, on sizes that are not multiples of the blocks, against a float64
    #    reference. Same-precision float32 gets about 1e-6; 1e-4 leaves room without hiding bugs.
    print("tiled vs naive (float64 reference), max abs error")
    for N, d, Br, Bc in [(1, 64, 64, 64), (7, 64, 64, 64), (113, 64, 64, 64), (1000, 64, 64, 32),
                         (203, 128, 32, 64), (4096, 64, 64, 64)]:
        for name, make in [("random", _inputs), ("max in last block", _max_in_last_block)]:
            Q, K, V = make(rng, N, d)
            ref = naive_attention(*(t.astype(np.float64) for t in (Q, K, V)))
            out = tiled_attention(Q, K, V, Br=Br, Bc=Bc)
            err = np.abs(out - ref).max()
            verdict = "ok" if out.dtype == Q.dtype and err < 1e-4 else "WRONG"
            print(f"  N={N:<5} d={d:<4} Br={Br:<3} Bc={Bc:<3} {name:<18} {err:.1e}  {verdict}")

    # 2. Memory and time as N doubles (float32, d = 64): naive's peak grows 4x (N^2 scores),
    #    tiled's 2x (the N x d output). Tiled is slower here: NumPy cannot fuse the inner loop.
    print(f"\n{'N':>6} {'naive s':>8} {'naive MB':>9} {'tiled s':>8} {'tiled MB':>9}")
    for N in [1024, 2048, 4096]:
        Q, K, V = _inputs(rng, N, 64)
        row = [N]
        for fn in (naive_attention, tiled_attention):
            t0 = time.perf_counter()
            fn(Q, K, V)
            row += [time.perf_counter() - t0, _peak_bytes(fn, Q, K, V) / 1e6]
        print("{:>6} {:>8.3f} {:>9.2f} {:>8.3f} {:>9.2f}".format(*row))
