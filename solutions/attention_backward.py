# BEGIN SOLUTION
"""The backward pass of tiled attention in NumPy: recompute instead of remember (reference).

Lesson sections "FlashAttention's forward pass" (step 4: L = m + log(l), for the backward pass),
"The backward pass: recompute instead of remember" and FlashAttention-2's skipping of blocks
above the diagonal in causal attention. Extension track.

    tiled_attention_lse  tiled_attention's forward pass, which also returns L = m + log(l) per
                         row and takes causal=: key j is visible to query i only if j <= i
    tiled_backward       (dQ, dK, dV) tile by tile: P = e^(S - L) rebuilt from L, the D trick,
                         nothing N x N

Run:
    python solutions/attention_backward.py      # self-check against float64 gradients
    make check EX=attention_backward            # the grader's checks for this exercise
"""
# END SOLUTION
# BEGIN STUB
# """The backward pass of tiled attention in NumPy: recompute instead of remember (exercise).
#
# Lesson sections "FlashAttention's forward pass" (step 4: L = m + log(l), for the backward pass),
# "The backward pass: recompute instead of remember" and FlashAttention-2's skipping of blocks
# above the diagonal in causal attention. Extension track.
#
#     tiled_attention_lse  tiled_attention's forward pass, which also returns L = m + log(l) per
#                          row and takes causal=: key j is visible to query i only if j <= i
#     tiled_backward       (dQ, dK, dV) tile by tile: P = e^(S - L) rebuilt from L, the D trick,
#                          nothing N x N
#
# Run:
#     python exercises/attention_backward.py      # self-check against float64 gradients
#     make check EX=attention_backward            # the grader's checks for this exercise
# """
# END STUB
import numpy as np


def _causal_mask(s, i, j):
    """Set s[r, c] = -inf where key j + c is after query i + r (key after query: j + c > i + r).
    Only a block that crosses the diagonal needs it; one fully below needs nothing."""
    rows = i + np.arange(s.shape[0])[:, None]
    cols = j + np.arange(s.shape[1])[None, :]
    s[cols > rows] = -np.inf


def tiled_attention_lse(Q, K, V, Br=64, Bc=64, causal=False):
    """tiled_attention's block rule, plus the logsumexp L = m + log(l) of every row.

    Args:
        Q, K, V: (N, d) float32 or float64; any N >= 1.
        Br, Bc: rows per query block, rows per key/value block.
        causal: key j is visible to query i only if j <= i; key blocks entirely above the
            diagonal are skipped, not computed.
    Returns:
        (O, L): O (N, d) like tiled_attention's; L (N,) float64, m + log(l) (natural log) per row.
    """
    N, d = Q.shape
    scale = Q.dtype.type(1.0 / np.sqrt(d))
    O = np.empty_like(Q)
    L = np.empty(N)
    for i in range(0, N, Br):
        q = Q[i:i + Br]                       # (br, d): the last block may be short
        br = q.shape[0]
        m = np.full(br, -np.inf)              # running row max
        l = np.zeros(br)                      # running sum of exp(s - m)
        acc = np.zeros_like(q)                # running sum of exp(s - m) * v
        for j in range(0, N, Bc):
            # BEGIN SOLUTION
            if causal and j > i + br - 1:     # the whole block is above the diagonal: skip it
                break
            k, v = K[j:j + Bc], V[j:j + Bc]
            s = q @ k.T
            s *= scale
            if causal and j + k.shape[0] - 1 > i:   # the block crosses the diagonal
                _causal_mask(s, i, j)
            m_new = np.maximum(m, s.max(axis=1))
            alpha = np.exp(m - m_new)
            s -= m_new.astype(s.dtype)[:, None]
            p = np.exp(s, out=s)
            l = l * alpha + p.sum(axis=1)
            acc *= alpha.astype(acc.dtype)[:, None]
            acc += p @ v
            m = m_new
            # END SOLUTION
            # BEGIN STUB
            # # TODO(attention_backward): roughly 14 lines: tiled_attention's block rule, plus
            # # causal attention (FlashAttention-2 "skips blocks that are fully masked out"):
            # #   if causal and the whole key block is above the diagonal (j > i + br - 1): stop,
            # #       every later block is above it too: skip, do not compute
            # #   s_blk = q K_blk^T * scale
            # #   if causal and the block crosses the diagonal: s_blk = -inf where key j' > query i'
            # #       (_causal_mask does it); query i sees keys j <= i, the diagonal included
            # #   m_new = max(m, row max of s_blk); p = e^(s_blk - m_new); alpha = e^(m - m_new)
            # #   l = l * alpha + row sum of p; acc = acc * alpha + p @ V_blk; m = m_new
            # raise NotImplementedError("TODO(attention_backward): tiled_attention_lse - the block "
            #                           "rule with causal skipping and masking")
            # END STUB
        O[i:i + Br] = acc / l.astype(acc.dtype)[:, None]
        # BEGIN SOLUTION
        L[i:i + Br] = m + np.log(l)           # the logsumexp: for the backward pass
        # END SOLUTION
        # BEGIN STUB
        # # TODO(attention_backward): roughly 1 line. "Also writes one extra number per row, the
        # # logsumexp ... L = m + log(l), for the backward pass." (natural log)
        # L[i:i + Br] = ...
        # END STUB
    return O, L


def tiled_backward(Q, K, V, O, L, dO, Br=64, Bc=64, causal=False):
    """Gradients of attention, one (Br, Bc) tile at a time, P rebuilt from L.

    Args:
        Q, K, V: (N, d) as given to the forward pass.
        O: (N, d) the forward output; L: (N,) its logsumexp m + log(l).
        dO: (N, d) the gradient of the loss with respect to O.
        Br, Bc, causal: as in tiled_attention_lse.
    Returns:
        (dQ, dK, dV), each (N, d).
    """
    # BEGIN SOLUTION
    N, d = Q.shape
    scale = 1.0 / np.sqrt(d)
    dQ = np.zeros(Q.shape)
    dK = np.zeros(K.shape)
    dV = np.zeros(V.shape)
    # the D trick: sum_j P_ij dP_ij = dO_i . O_i, one number per row, once, before the loop
    D = np.sum(dO.astype(np.float64) * O, axis=1)
    for i in range(0, N, Br):
        q, do = Q[i:i + Br].astype(np.float64), dO[i:i + Br].astype(np.float64)
        br = q.shape[0]
        L_i, D_i = L[i:i + Br], D[i:i + Br]
        dq = np.zeros((br, d))
        for j in range(0, N, Bc):
            if causal and j > i + br - 1:     # above the diagonal: P is 0 there
                break
            k, v = K[j:j + Bc].astype(np.float64), V[j:j + Bc].astype(np.float64)
            s = q @ k.T * scale               # recompute S for the tile
            if causal and j + k.shape[0] - 1 > i:
                _causal_mask(s, i, j)
            p = np.exp(s - L_i[:, None])      # the exact probabilities: no running max needed
            dV[j:j + Bc] += p.T @ do          # dV += P^T dO
            dp = do @ v.T                     # dP = dO V^T
            ds = p * (dp - D_i[:, None])      # dS = P o (dP - D)
            dq += ds @ k * scale              # dQ += dS K * scale
            dK[j:j + Bc] += ds.T @ q * scale  # dK += dS^T Q * scale
        dQ[i:i + Br] = dq
    return dQ, dK, dV
    # END SOLUTION
    # BEGIN STUB
    # # TODO(attention_backward): roughly 25 lines. "In the backward pass, a kernel walks the same
    # # tiles again: reload Q, K, V tiles, recompute S = Q K^T for the tile, and rebuild the exact
    # # probabilities as P = e^(S - L). No running max is needed this time."
    # #   D    = rowsum(dO o O)           one number per query row, computed once, before the loop
    # #   for each query block i (Br rows) and key block j (Bc rows), skipping and masking the
    # #   causal blocks exactly as the forward does:
    # #     S    = Q_i K_j^T * scale       (br, bc): the one tile you build
    # #     P    = e^(S - L_i)
    # #     dV_j += P^T dO_i
    # #     dP   = dO_i V_j^T
    # #     dS   = P o (dP - D_i)          softmax backward, elementwise (the D trick)
    # #     dQ_i += dS K_j * scale         dK_j += dS^T Q_i * scale
    # # Nothing N x N: dQ, dK, dV (N, d) are the only big arrays (the grader measures memory).
    # raise NotImplementedError("TODO(attention_backward): tiled_backward - recompute P = e^(S - L) "
    #                           "tile by tile, the D trick, dQ, dK, dV")
    # END STUB


def _reference(Q, K, V, dO, causal=False):
    """Float64 attention, its L and its gradients, with the N x N matrices (for the self-check)."""
    Q, K, V, dO = (t.astype(np.float64) for t in (Q, K, V, dO))
    N, d = Q.shape
    S = Q @ K.T / np.sqrt(d)
    if causal:
        S[np.triu(np.ones((N, N), bool), 1)] = -np.inf
    m = S.max(axis=1, keepdims=True)
    L = (m + np.log(np.exp(S - m).sum(axis=1, keepdims=True)))[:, 0]
    P = np.exp(S - L[:, None])
    O = P @ V
    dP = dO @ V.T
    dS = P * (dP - (dP * P).sum(axis=1, keepdims=True))
    return O, L, dS @ K / np.sqrt(d), dS.T @ Q / np.sqrt(d), P.T @ dO


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    print("forward and backward vs float64, max abs error")
    for N, d, Br, Bc in [(1, 16, 8, 8), (7, 32, 4, 3), (113, 64, 32, 48), (200, 64, 64, 16)]:
        for causal in (False, True):
            Q, K, V, dO = (rng.standard_normal((N, d)) for _ in range(4))
            O_ref, L_ref, *grads_ref = _reference(Q, K, V, dO, causal)
            O, L = tiled_attention_lse(Q, K, V, Br, Bc, causal)
            grads = tiled_backward(Q, K, V, O, L, dO, Br, Bc, causal)
            err = max(np.abs(a - b).max() for a, b in zip((O, L, *grads), (O_ref, L_ref, *grads_ref)))
            print(f"  N={N:<4} d={d:<3} Br={Br:<3} Bc={Bc:<3} causal={causal!s:<5} {err:.1e}  "
                  f"{'ok' if err < 1e-9 else 'WRONG'}")
