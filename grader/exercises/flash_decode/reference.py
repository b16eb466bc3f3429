"""References and inputs of flash_decode, shared by its check modules, its hidden checks and
tools/bench.py (grader.registry.exercise_module("flash_decode", "reference")).

Every input is rounded to the dtype the kernel sees (grader.judge.answers.inputs), so the float64
references here see exactly the numbers the kernel does; gpu_decode_reference is the float32
answer on the GPU for the gpu and perf layers and the bench; decode_same_precision is plain
PyTorch in the inputs' dtype, the baseline of the tolerance rule on every layer.
"""

from __future__ import annotations

import numpy as np

from grader.judge.answers.inputs import randn

CACHE_GUARD_ROWS = 128   # poison rows behind each cache: more than any tile can reach past L_max


def attention_rows(s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(s) @ v for scores s (rows, n) and values v (n, D), float64; n = 0 gives 0."""
    if s.shape[-1] == 0:
        return np.zeros(s.shape[:-1] + v.shape[-1:])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p @ v) / p.sum(-1, keepdims=True)


def decode_reference(q, k, v, seq_lens, interleaved: bool = False) -> np.ndarray:
    """q (B, Hq, D), k and v (B, Hkv, L_max, D): o (B, Hq, D) in float64 over each sequence's
    first seq_lens[b] keys, query head h reading KV head h // (Hq // Hkv) (with `interleaved`,
    the usual mistake: h % Hkv)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    o = np.zeros((B, Hq, D))
    for b in range(B):
        n = int(seq_lens[b])
        for h in range(Hq):
            g = h % Hkv if interleaved else h // (Hq // Hkv)
            o[b, h] = attention_rows((q[b, h] @ k[b, g, :n].T / np.sqrt(D))[None], v[b, g, :n])[0]
    return o


def score_rounding_floor(q, k, v, seq_lens, dtype: str = "float16") -> np.ndarray:
    """(B, Hq): for each query head, a first-order bound of how far a correct kernel's o can be
    from the float64 answer when it rounds its scores to `dtype` (q . k element-wise, products
    and their sum in float16, as public one-row decode kernels write it): each score s_j off by
    d_j = EPS * (|s_j| + sqrt(log2(D) + 1) * ||q * k_j|| / sqrt(D)) (the last rounding, and the
    products' and the sum's tree of adds), which moves o_d by at most sum_j p_j d_j |v_jd - o_d|;
    the root mean square over d. Far below the dtype's rounding of o at ordinary scores; with
    scores in the hundreds and a near-tie at the max, a percent or more of o."""
    from grader.judge.answers.compare import EPS

    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, Hq, D = q.shape
    Hkv = k.shape[1]
    floor = np.zeros((B, Hq))
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        for h in range(Hq):
            kb, vb = k[b, h // (Hq // Hkv), :n], v[b, h // (Hq // Hkv), :n]
            s = kb @ q[b, h] / np.sqrt(D)
            p = np.exp(s - s.max())
            p /= p.sum()
            terms = np.sqrt(((kb * q[b, h]) ** 2).sum(1)) / np.sqrt(D)
            d = EPS[dtype] * (np.abs(s) + np.sqrt(np.log2(D) + 1) * terms)
            o = p @ vb
            floor[b, h] = np.sqrt(np.mean(((p * d) @ np.abs(vb - o)) ** 2))
    return floor


def state_of(s: np.ndarray, v: np.ndarray):
    """The partial state (m, l, acc) of scores s (rows, n) over values v (n, D); n = 0 or a row
    of only -inf gives the empty state (-inf, 0, 0)."""
    rows, D = s.shape[0], v.shape[1]
    m = np.full(rows, -np.inf) if s.shape[1] == 0 else s.max(1)
    shift = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - shift[:, None]) if s.shape[1] else np.zeros((rows, 0))
    return m, e.sum(1), e @ v if s.shape[1] else np.zeros((rows, D))


def decode_inputs(rng, B, Hq, Hkv, L, D, dtype="float16", scale=1.0):
    """q (B, Hq, D) and k, v (B, Hkv, L, D): arrays exact in `dtype`; q and k times `scale`."""
    q = randn(rng, (B, Hq, D), dtype, scale)
    k = randn(rng, (B, Hkv, L, D), dtype, scale)
    v = randn(rng, (B, Hkv, L, D), dtype)
    return q, k, v


def fill_past(k, v, seq_lens, k_fill, v_fill):
    """Cache positions past seq_lens[b] set to the given values (arrays broadcast or floats)."""
    k, v = k.copy(), v.copy()
    for b, n in enumerate(seq_lens):
        k[b, :, n:] = k_fill if np.isscalar(k_fill) else k_fill[b]
        v[b, :, n:] = v_fill
    return k, v


def gpu_decode_reference(q, k, v, seq_lens):
    """flash_decode's answer in float32 on the GPU, one sequence at a time."""
    import torch

    return _decode_torch(q, k, v, seq_lens, torch.float32)


def decode_same_precision(q, k, v, seq_lens, dtype: str | None = None):
    """flash_decode's answer computed by plain PyTorch in the inputs' own dtype (q k^T, the
    scale, the softmax and p @ v each rounded to it, as eager float16 attention does): the
    baseline of flash-attention's tolerance rule (compare.assert_close's `baseline`). Torch
    tensors stay on their device (the gpu and perf layers); NumPy arrays exact in `dtype` (the
    interp layer) go through torch on the CPU and come back as float64 arrays."""
    import torch

    if not isinstance(q, np.ndarray):
        return _decode_torch(q, k, v, seq_lens, q.dtype)
    dt = getattr(torch, dtype)
    q, k, v = (torch.from_numpy(np.asarray(t, np.float32)).to(dt) for t in (q, k, v))
    lens = torch.from_numpy(np.asarray(seq_lens, np.int64))
    return _decode_torch(q, k, v, lens, dt).double().numpy()


def _decode_torch(q, k, v, seq_lens, work):
    """Decode attention in torch dtype `work` on the inputs' device, one sequence at a time;
    the query heads of a group are matched to their KV head by a view, so no cache is copied
    per query head. A sequence of length 0 gives 0."""
    import torch

    B, Hq, D = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    out = torch.zeros(q.shape, dtype=work, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        qq = q[b].to(work).reshape(Hkv, group, D)
        kk, vv = k[b, :, :n].to(work), v[b, :, :n].to(work)              # (Hkv, n, D)
        s = torch.matmul(qq, kk.transpose(1, 2)) * D ** -0.5             # (Hkv, group, n)
        out[b] = torch.matmul(torch.softmax(s, dim=-1), vv).reshape(Hq, D)
        del kk, vv, s
    return out
