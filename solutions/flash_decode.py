# BEGIN SOLUTION
"""Flash-Decoding: one query row against a long, ragged, grouped KV cache (solution).

Lesson: FlashAttention and kernels, the Flash-Decoding paragraph: "In decoding, there is one query
row and a long KV cache. A single query block gives the GPU almost nothing to parallelize, so
Flash-Decoding splits the keys across many programs, each producing its own (m, l, o), and then
merges them with the rule from the Predict above. Same trick, opposite axis." The merge rule is
`merge` from online_softmax.py, with an output accumulator next to l.

What you will learn:
  - the partial state of a slice of the keys is (m, l, acc): its max score, its sum of
    exp(s - m), and its unnormalised output sum of exp(s - m) * v;
  - two states merge by moving both onto the larger max: l = l_a*exp(m_a - m) + l_b*exp(m_b - m),
    the same for acc; the empty state (-inf, 0, 0) is the identity, as long as -inf - (-inf)
    (nan) is never computed;
  - the split-K decode kernel: a program per (split of the keys, KV head, sequence), so a single
    sequence still fills every SM; a second, tiny kernel merges the splits;
  - grouped-query attention: the Hq / Hkv query heads that share one KV head form the "query tile"
    of one program, so each K and V row is read from HBM once for the whole group;
  - ragged lengths: sequence b attends to its first seq_lens[b] keys only; a split past the end
    holds no keys and hands back the empty state;
  - decoding is memory bound: the only number that matters is how fast K and V stream from HBM.

    merge_partials  NumPy: merge a list of (m, l, acc) partial states into o
    flash_decode    Triton: split-K decoding over a (B, Hkv, L_max, D) cache with GQA

Run:
  python solutions/flash_decode.py                      # self-check on a CUDA machine
  TRITON_INTERPRET=1 python solutions/flash_decode.py   # on a CPU, with CPU tensors (slow)
  python solutions/flash_decode.py --bench              # GB/s of K and V against SDPA and copy
  python solutions/flash_decode.py --bench --sweep      # also try other tiles, warps, splits
"""
# END SOLUTION
# BEGIN STUB
# """Exercise flash_decode: Flash-Decoding, one query row against a long, ragged, grouped KV cache.
#
# Lesson: FlashAttention and kernels, the Flash-Decoding paragraph: "In decoding, there is one query
# row and a long KV cache. A single query block gives the GPU almost nothing to parallelize, so
# Flash-Decoding splits the keys across many programs, each producing its own (m, l, o), and then
# merges them with the rule from the Predict above. Same trick, opposite axis." Extension track.
#
# Your job, in this order:
#   1. merge_state and merge_partials (NumPy): `merge` from online_softmax.py with an output
#      accumulator next to l. A split that holds no keys is the empty state (-inf, 0, 0), and
#      merging with it must change nothing: never compute -inf - (-inf) (that is nan).
#   2. _decode_split (Triton): one program per (split of the keys, KV head, sequence). Its "query
#      tile" is the GROUP query heads that share its KV head (grouped-query attention); it streams
#      its split's keys BLOCK_N at a time with the same block rule as flash_triton's _flash_fwd, and
#      stores its partial state (m, l, acc). No division: that is the merge's job.
#   3. _decode_merge (Triton): one program per (sequence, query head) merges the num_splits states
#      with the rule of step 1 and normalises once.
#   4. pick_num_splits, then delete the `raise NotImplementedError` line in flash_decode.
# The merge runs in a Triton kernel too: the wrapper only allocates and launches (reading
# seq_lens.max() to choose a split count is fine; any other torch arithmetic is not).
#
# Run:
#   python exercises/flash_decode.py                      # self-check on a CUDA machine
#   TRITON_INTERPRET=1 python exercises/flash_decode.py   # on a CPU, with CPU tensors (slow)
#   python exercises/flash_decode.py --bench              # GB/s of K and V against SDPA and copy
#   make check EX=flash_decode                            # the grader's checks
# """
# END STUB

import math
import os
import sys
import time

import numpy as np
import torch
import triton
import triton.language as tl


# --------------------------------------------------------------------------------------------
# NumPy: the merge rule on (m, l, acc) states.
# --------------------------------------------------------------------------------------------


def merge_state(a, b):
    """Merge two partial states of the same rows into one.

    Args:
        a, b: (m, l, acc) with m and l floats or (rows,) arrays and acc of shape (D,) or
            (rows, D); m = max score of the keys seen, l = sum of exp(s - m), acc = sum of
            exp(s - m) * v. The empty state (-inf, 0, 0) stands for no keys at all.
    Returns:
        (m, l, acc) of all the keys of a and b, float64.
    """
    # BEGIN SOLUTION
    m_a, l_a, acc_a = (np.asarray(t, dtype=np.float64) for t in a)
    m_b, l_b, acc_b = (np.asarray(t, dtype=np.float64) for t in b)
    m = np.maximum(m_a, m_b)
    # Both sides empty: m = -inf, and exp(m_a - m) would be exp(-inf - -inf) = nan. Shift by 0
    # instead: exp(-inf - 0) = 0, so an empty side contributes nothing and the result stays empty.
    shift = np.where(np.isneginf(m), 0.0, m)
    alpha, beta = np.exp(m_a - shift), np.exp(m_b - shift)   # both <= 1: nothing overflows
    l = l_a * alpha + l_b * beta
    acc = acc_a * alpha[..., None] + acc_b * beta[..., None]
    return m, l, acc
    # END SOLUTION
    # BEGIN STUB
    # # TODO(flash_decode): roughly 6 lines. The merge rule from the Predict, once more:
    # #   m     = max(m_a, m_b)
    # #   alpha = exp(m_a - m), beta = exp(m_b - m)        (both <= 1: nothing overflows)
    # #   l     = l_a * alpha + l_b * beta
    # #   acc   = acc_a * alpha[..., None] + acc_b * beta[..., None]
    # #   Where both sides are empty, m is -inf and m_a - m is -inf - (-inf) = nan: subtract 0
    # #   there instead (np.where(np.isneginf(m), 0.0, m)), so the result stays empty.
    # raise NotImplementedError("TODO(flash_decode): merge_state - the merge rule with acc, "
    #                           "the empty state as identity")
    # END STUB


def merge_partials(parts):
    """Merge the partial states of the splits of one set of keys into the attention output.

    Args:
        parts: a non-empty list of (m, l, acc), one per split of the keys, in any order: m and
            l floats or (rows,) arrays, acc (D,) or (rows, D), all splits the same shape. A split
            that holds no keys is (-inf, 0, 0) (acc all zeros).
    Returns:
        o = acc / l of all the keys, float64, the shape of acc. A row whose every split is empty
        (a sequence of length 0) has no keys to average: its o is 0, never nan.
    """
    # BEGIN SOLUTION
    m, l, acc = (np.asarray(t, dtype=np.float64) for t in parts[0])
    state = (np.full(m.shape, -np.inf), np.zeros(l.shape), np.zeros(acc.shape))   # empty
    for part in parts:
        state = merge_state(state, part)
    _, l, acc = state
    # Normalise once, at the end. l = 0 only where every split was empty: o = 0 there.
    safe_l = np.where(l > 0, l, 1.0)
    return np.where((l > 0)[..., None], acc / safe_l[..., None], 0.0)
    # END SOLUTION
    # BEGIN STUB
    # # TODO(flash_decode): roughly 6 lines.
    # #   start from the empty state (-inf, 0, 0) shaped like parts[0], merge_state every part
    # #   into it, then o = acc / l[..., None], and 0 where l == 0.
    # raise NotImplementedError("TODO(flash_decode): merge_partials - merge every split's "
    #                           "(m, l, acc), then divide by l once")
    # END STUB


# --------------------------------------------------------------------------------------------
# BEGIN SOLUTION
# Reference: plain PyTorch decode attention with a ragged, grouped cache.
# END SOLUTION
# BEGIN STUB
# # Reference (given): plain PyTorch decode attention with a ragged, grouped cache.
# END STUB
# --------------------------------------------------------------------------------------------


def decode_reference(q, k_cache, v_cache, seq_lens):
    """q (B, Hq, D), caches (B, Hkv, L_max, D), seq_lens (B,): o (B, Hq, D) in float32
    (float64 for float64 inputs).

    Query head h reads KV head h // (Hq // Hkv). Keys at positions >= seq_lens[b] get no weight;
    a sequence of length 0 gives o = 0."""
    B, Hq, D = q.shape
    Hkv, L = k_cache.shape[1], k_cache.shape[2]
    group = Hq // Hkv
    work = torch.promote_types(q.dtype, torch.float32)                  # float64 stays float64
    k = k_cache.to(work).repeat_interleave(group, dim=1)                # (B, Hq, L, D)
    v = v_cache.to(work).repeat_interleave(group, dim=1)
    s = torch.einsum("bhd,bhnd->bhn", q.to(work), k) * D ** -0.5        # (B, Hq, L)
    pad = torch.arange(L, device=q.device)[None, :] >= seq_lens.to(q.device).long()[:, None]
    s = s.masked_fill(pad[:, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)                        # length 0: all -inf
    return torch.einsum("bhn,bhnd->bhd", p, v)


# --------------------------------------------------------------------------------------------
# Kernel 1: one program per (split, KV head, sequence). It owns the GROUP query heads that share
# this KV head (a (BLOCK_H, D) "query tile", rows past GROUP are padding) and the keys
# BEGIN SOLUTION
# [lo, min(lo + SPLIT, seq_len)) of its sequence, BLOCK_N at a time. It writes the partial state
# (m, l, acc) of each of its query heads: no division, that is the merge's job.
# Per program: read GROUP*D of q, at most SPLIT*D of K and of V, write GROUP*(D + 2) floats.
# END SOLUTION
# BEGIN STUB
# # [lo, min(lo + split_size, seq_len)) of its sequence, BLOCK_N at a time.
# END STUB
# --------------------------------------------------------------------------------------------


@triton.jit
def _decode_split(Q, K, V, SeqLens, MidM, MidL, MidAcc,
                  stride_qb, stride_qh,
                  stride_kb, stride_kh, stride_kn,
                  stride_vb, stride_vh, stride_vn,
                  num_splits, split_size, scale,
                  GROUP: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                  D: tl.constexpr):
    pid_s = tl.program_id(0)            # which split of the keys
    pid_kv = tl.program_id(1)           # which KV head
    pid_b = tl.program_id(2)            # which sequence
    Hq = tl.num_programs(1) * GROUP
    dims = tl.arange(0, D)
    offs_n = tl.arange(0, BLOCK_N)

    # BEGIN SOLUTION
    # The query heads of this KV head: GQA's heads pid_kv*GROUP .. pid_kv*GROUP + GROUP - 1.
    # END SOLUTION
    offs_h = tl.arange(0, BLOCK_H)
    # BEGIN SOLUTION
    heads = pid_kv * GROUP + offs_h
    head_ok = offs_h < GROUP
    q = tl.load(Q + pid_b * stride_qb + heads[:, None] * stride_qh + dims[None, :],
                mask=head_ok[:, None], other=0.0)                      # (BLOCK_H, D)

    # This split's keys, cut at the sequence's own length. A split past the end has lo >= hi:
    # the loop does not run and the state stays empty, (-inf, 0, 0). (Looping to lo + SPLIT and
    # masking instead would give a block of only -inf scores, and exp(-inf - -inf) = nan.)
    seq_len = tl.load(SeqLens + pid_b)
    lo = pid_s * split_size
    hi = tl.minimum(lo + split_size, seq_len)
    # END SOLUTION
    # BEGIN STUB
    # head_ok = offs_h < GROUP            # rows past GROUP are padding (tl.dot needs 16 rows)
    # END STUB
    # int64: a (8, 32, 128K, 128) cache is 2^32 elements, past what int32 offsets can reach
    k_base = K + pid_b.to(tl.int64) * stride_kb + pid_kv.to(tl.int64) * stride_kh
    v_base = V + pid_b.to(tl.int64) * stride_vb + pid_kv.to(tl.int64) * stride_vh

    # BEGIN SOLUTION
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)   # running max of the scores
    l_i = tl.zeros([BLOCK_H], tl.float32)                 # running sum of exp(s - m_i)
    acc = tl.zeros([BLOCK_H, D], tl.float32)              # running sum of exp(s - m_i) * v
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        valid = cols < seq_len          # keys past seq_len hold another request's data, or junk
        # K tile transposed (D, BLOCK_N), so tl.dot(q, k) is q K^T: read BLOCK_N*D elements
        k = tl.load(k_base + cols[None, :] * stride_kn + dims[:, None],
                    mask=valid[None, :], other=0.0)
        s = tl.dot(q, k) * scale                                       # (BLOCK_H, BLOCK_N)
        s = tl.where(valid[None, :], s, float("-inf"))                 # padded keys: weight 0
        # the block rule of the forward kernel, unchanged: this is the same online softmax
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * stride_vn + dims[None, :],
                    mask=valid[:, None], other=0.0)                    # (BLOCK_N, D)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # MidM, MidL: (B, Hq, num_splits); MidAcc: (B, Hq, num_splits, D), all float32, contiguous
    row = (pid_b * Hq + heads) * num_splits + pid_s                    # (BLOCK_H,)
    tl.store(MidM + row, m_i, mask=head_ok)
    tl.store(MidL + row, l_i, mask=head_ok)
    tl.store(MidAcc + row[:, None] * D + dims[None, :], acc, mask=head_ok[:, None])
    # END SOLUTION
    # BEGIN STUB
    # # 0. heads (BLOCK_H,): the GROUP query heads that read KV head pid_kv (query head h reads
    # #    KV head h // GROUP: which h are those?); q = their rows of Q, (BLOCK_H, D), masked on
    # #    head_ok, other=0.0                                                   (roughly 3 lines)
    # # 1. seq_len = this sequence's length (load it from SeqLens); this split's keys are
    # #    lo = pid_s * split_size up to hi = min(lo + split_size, seq_len). A split past the end
    # #    has lo >= hi: the loop below does not run and the state stays empty.  (roughly 3 lines)
    # # 2. m_i = -inf, l_i = 0 (BLOCK_H,) and acc = 0 (BLOCK_H, D), all float32  (roughly 3 lines)
    # # 3. for start in range(lo, hi, BLOCK_N): the block rule of _flash_fwd, with
    # #    valid = cols < seq_len for the K and V load masks and for the -inf on padded scores
    # #                                                                         (roughly 13 lines)
    # # 4. store m_i, l_i and acc of each real query head (mask head_ok) at its row
    # #    (pid_b * Hq + heads) * num_splits + pid_s of MidM, MidL (B, Hq, num_splits) and
    # #    MidAcc (B, Hq, num_splits, D), all float32                           (roughly 4 lines)
    # ...
    # END STUB


# --------------------------------------------------------------------------------------------
# Kernel 2: one program per (sequence, query head) merges its num_splits partial states with
# the rule from the Predict, BLOCK_S states at a time, then normalises once.
# BEGIN SOLUTION
# Per program: read num_splits * (D + 2) floats, write D elements: tiny next to kernel 1.
# END SOLUTION
# --------------------------------------------------------------------------------------------


@triton.jit
def _decode_merge(MidM, MidL, MidAcc, O, stride_ob, stride_oh, num_splits, Hq,
                  BLOCK_S: tl.constexpr, D: tl.constexpr):
    pid = tl.program_id(0)              # b * Hq + h
    b = pid // Hq
    h = pid % Hq
    dims = tl.arange(0, D)
    offs_s = tl.arange(0, BLOCK_S)

    # BEGIN SOLUTION
    m_run = tl.max(tl.full([BLOCK_S], float("-inf"), tl.float32), axis=0)   # the empty state
    l_run = tl.sum(tl.zeros([BLOCK_S], tl.float32), axis=0)
    acc_run = tl.zeros([D], tl.float32)
    for s0 in range(0, num_splits, BLOCK_S):
        splits = s0 + offs_s
        ok = splits < num_splits
        m = tl.load(MidM + pid * num_splits + splits, mask=ok, other=float("-inf"))
        l = tl.load(MidL + pid * num_splits + splits, mask=ok, other=0.0)
        acc = tl.load(MidAcc + (pid * num_splits + splits)[:, None] * D + dims[None, :],
                      mask=ok[:, None], other=0.0)                     # (BLOCK_S, D)
        # The merge rule: move every state onto the common max m_new. Empty splits (m = -inf)
        # get weight exp(-inf - m_new) = 0, the identity. If every split so far is empty, m_new
        # is -inf too: shift by 0 instead, so no -inf - (-inf) = nan is ever computed.
        m_new = tl.maximum(m_run, tl.max(m, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_run - shift)
        w = tl.exp(m - shift)                                          # (BLOCK_S,)
        l_run = l_run * alpha + tl.sum(l * w, axis=0)
        acc_run = acc_run * alpha + tl.sum(acc * w[:, None], axis=0)
        m_run = m_new

    # Normalise once. l_run = 0 only for a sequence of length 0: its output is 0, not nan.
    o = tl.where(l_run > 0, acc_run / tl.where(l_run > 0, l_run, 1.0), 0.0)
    tl.store(O + b * stride_ob + h * stride_oh + dims, o.to(O.dtype.element_ty))
    # END SOLUTION
    # BEGIN STUB
    # # 1. the empty state: m_run = -inf, l_run = 0 (float32 scalars, e.g.
    # #    tl.max(tl.full([BLOCK_S], float("-inf"), tl.float32), axis=0)), acc_run = 0 (D,)
    # #                                                                         (roughly 3 lines)
    # # 2. for s0 in range(0, num_splits, BLOCK_S): load BLOCK_S states (masked: m other=-inf,
    # #    l and acc other=0), then merge_state's rule on vectors: m_new = max(m_run, max of m),
    # #    shift = 0 where m_new is -inf else m_new, alpha = exp(m_run - shift),
    # #    w = exp(m - shift), l_run = l_run*alpha + sum(l*w), acc_run likewise, m_run = m_new
    # #                                                                         (roughly 12 lines)
    # # 3. o = acc_run / l_run (0 where l_run == 0), stored in O's dtype at
    # #    O + b * stride_ob + h * stride_oh + dims                             (roughly 2 lines)
    # ...
    # END STUB


# --------------------------------------------------------------------------------------------
# Host wrapper and its launch settings.
# --------------------------------------------------------------------------------------------

# Programs to aim for, per SM: enough that the last wave is short and every SM has several
# programs' worth of loads in flight (a decode kernel is a stream of HBM reads, nothing else).
PROGRAMS_PER_SM = 8
MIN_KEYS_PER_SPLIT = 256      # below this a program spends more on its prologue and its merge
                              # state (D + 2 floats written, read back) than on keys
MAX_SPLITS = 256


def launch_config(D, elem_bytes, device):
    """(BLOCK_N, num_warps, num_stages) for this device: the biggest K/V tiles whose pipelined
    copies (num_stages of a K tile and a V tile) fit in the block's shared memory.

    Interpreter (CPU tensors): small tiles, so the tests' short caches still span several."""
    if device.type != "cuda":
        return 16, 4, 1
    props = torch.cuda.get_device_properties(device)
    smem = getattr(props, "shared_memory_per_block_optin", 48 * 1024)
    for block_n, stages in ((128, 3), (64, 4), (64, 3), (64, 2), (32, 2)):
        if stages * 2 * block_n * D * elem_bytes <= 0.8 * smem:
            return block_n, 4, stages
    return 16, 4, 1


def pick_num_splits(B, Hkv, L_max, BLOCK_N, device):
    """Splits of the keys per (sequence, KV head): enough programs to fill every SM several
    times over (a single long sequence with few KV heads needs many splits; a big batch needs
    few), but never splits shorter than MIN_KEYS_PER_SPLIT keys."""
    # BEGIN SOLUTION
    sms = torch.cuda.get_device_properties(device).multi_processor_count \
        if device.type == "cuda" else 4
    wanted = triton.cdiv(PROGRAMS_PER_SM * sms, B * Hkv)
    most = max(1, triton.cdiv(L_max, max(MIN_KEYS_PER_SPLIT, BLOCK_N)))
    return max(1, min(wanted, most, MAX_SPLITS))
    # END SOLUTION
    # BEGIN STUB
    # # TODO(flash_decode): roughly 4 lines.
    # #   sms = torch.cuda.get_device_properties(device).multi_processor_count on CUDA, else 4
    # #   wanted = cdiv(PROGRAMS_PER_SM * sms, B * Hkv) programs' worth of splits,
    # #   at most cdiv(L_max, max(MIN_KEYS_PER_SPLIT, BLOCK_N)) and MAX_SPLITS, at least 1
    # raise NotImplementedError("TODO(flash_decode): pick_num_splits - enough splits to fill the SMs")
    # END STUB


def flash_decode(q, k_cache, v_cache, seq_lens, num_splits=None, BLOCK_N=None, num_warps=None,
                 num_stages=None):
    """Decode attention: one query row per head against the first seq_lens[b] keys of a cache.

    Args:
        q: (B, Hq, D) float16 or bfloat16 on CUDA (CPU tensors under TRITON_INTERPRET=1);
            float32 works too. D is a power of two >= 16.
        k_cache, v_cache: (B, Hkv, L_max, D), the dtype of q; Hq is a multiple of Hkv (grouped-
            query attention): query head h reads KV head h // (Hq // Hkv).
        seq_lens: (B,) int32, 0 <= seq_lens[b] <= L_max. Sequence b attends to keys
            0 .. seq_lens[b] - 1 only; what lies past them is never given weight. A sequence
            of length 0 has no keys: its output is 0.
        num_splits: splits of the key axis per (sequence, KV head); None picks one from the
            device's SM count, B, Hkv and L_max.
        BLOCK_N, num_warps, num_stages: launch settings; None picks them for the device.

    Returns:
        o: (B, Hq, D), the dtype of q: softmax(q k^T / sqrt(D)) v per (sequence, head).
    """
    # BEGIN STUB
    # raise NotImplementedError("TODO(flash_decode): _decode_split, _decode_merge and "
    #                           "pick_num_splits; then delete this line")
    # END STUB
    B, Hq, D = q.shape
    Hkv, L_max = k_cache.shape[1], k_cache.shape[2]
    assert k_cache.shape == (B, Hkv, L_max, D) and v_cache.shape == k_cache.shape, \
        "k_cache and v_cache must both be (B, Hkv, L_max, D)"
    assert Hq % Hkv == 0, f"Hq = {Hq} must be a multiple of Hkv = {Hkv}"
    assert D >= 16 and D & (D - 1) == 0, f"D must be a power of two >= 16 for tl.dot, got {D}"
    assert seq_lens.shape == (B,), f"seq_lens must be (B,) = ({B},), got {tuple(seq_lens.shape)}"
    # the kernels index the last dimension with stride 1 (a copy only if it is not)
    q, k_cache, v_cache = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k_cache, v_cache))
    seq_lens = seq_lens.to(device=q.device, dtype=torch.int32)

    block_n, warps, stages = launch_config(D, q.element_size(), q.device)
    BLOCK_N, num_warps, num_stages = BLOCK_N or block_n, num_warps or warps, num_stages or stages
    if num_splits is None:
        num_splits = pick_num_splits(B, Hkv, L_max, BLOCK_N, q.device)
    # Whole blocks per split, so no block straddles two splits.
    split_size = triton.cdiv(triton.cdiv(max(L_max, 1), num_splits), BLOCK_N) * BLOCK_N
    group = Hq // Hkv

    mid_m = torch.empty((B, Hq, num_splits), dtype=torch.float32, device=q.device)
    mid_l = torch.empty_like(mid_m)
    mid_acc = torch.empty((B, Hq, num_splits, D), dtype=torch.float32, device=q.device)
    o = torch.empty_like(q)

    _decode_split[(num_splits, Hkv, B)](
        q, k_cache, v_cache, seq_lens, mid_m, mid_l, mid_acc,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        num_splits, split_size, 1.0 / math.sqrt(D),
        GROUP=group, BLOCK_H=max(16, triton.next_power_of_2(group)), BLOCK_N=BLOCK_N, D=D,
        num_warps=num_warps, num_stages=num_stages)
    _decode_merge[(B * Hq,)](
        mid_m, mid_l, mid_acc, o, o.stride(0), o.stride(1), num_splits, Hq,
        BLOCK_S=min(32, triton.next_power_of_2(num_splits)), D=D, num_warps=4)
    return o


# --------------------------------------------------------------------------------------------
# Self-check on awkward sizes against a float64 reference.
# --------------------------------------------------------------------------------------------

FLOOR = {torch.float16: 3e-3, torch.bfloat16: 2e-2,
         torch.float32: 1e-5 if os.environ.get("TRITON_INTERPRET") == "1" else 2e-2}


def _check_merge(rng):
    D, rows, n = 32, 3, 300
    s = rng.standard_normal((rows, n)) * 10
    v = rng.standard_normal((n, D))
    p = np.exp(s - s.max(1, keepdims=True))
    want = (p @ v) / p.sum(1, keepdims=True)
    cuts = [0, 0, 1, 77, 77, 200, 300]                 # two empty splits and a one-key split
    parts = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        if a == b:
            parts.append((np.full(rows, -np.inf), np.zeros(rows), np.zeros((rows, D))))
            continue
        m = s[:, a:b].max(1)
        e = np.exp(s[:, a:b] - m[:, None])
        parts.append((m, e.sum(1), e @ v[a:b]))
    for order in (parts, parts[::-1]):
        err = np.abs(merge_partials(order) - want).max()
        assert err < 1e-12, f"merge_partials: max abs error {err:.2e}"
    empty = (-np.inf, 0.0, np.zeros(D))
    assert (merge_partials([empty, empty]) == 0).all(), "all splits empty: o must be 0"
    print("  ok  merge_partials: uneven splits, empty splits, both orders, all empty")


def _check(name, q, k, v, seq_lens, **kw):
    ref = decode_reference(q.double(), k.double(), v.double(), seq_lens).double()
    base = (decode_reference(q, k, v, seq_lens).to(q.dtype).double() - ref).abs().max().item()
    t0 = time.perf_counter()
    got = flash_decode(q, k, v, seq_lens, **kw)
    if got.is_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    assert got.shape == q.shape and got.dtype == q.dtype, (
        f"{name}: expected {tuple(q.shape)} {q.dtype}, got {tuple(got.shape)} {got.dtype}")
    assert not got.isnan().any(), f"{name}: output has NaN (an empty split merged as nan?)"
    err = (got.double() - ref).abs()
    allowed = 2 * base + FLOOR[q.dtype]
    assert err.max() <= allowed, f"{name}: max abs error {err.max():.2e}, allowed {allowed:.1e}"
    print(f"  ok  {name:52s} err {err.max():.1e}  {seconds:5.2f} s")


def _self_check(device):
    _check_merge(np.random.default_rng(0))
    torch.manual_seed(0)
    interp = device == "cpu"
    dtypes = [torch.float16, torch.float32] if interp else [torch.float16, torch.bfloat16]
    cases = [  # B, Hq, Hkv, L_max, D, seq_lens, num_splits
        (2, 2, 2, 100, 64, [100, 37], 3),
        (3, 4, 1, 64, 128, [1, 64, 17], None),       # MQA, a length-1 sequence
        (2, 8, 2, 80, 64, [80, 5], 4),               # GQA groups of 4; splits with no keys
        (1, 6, 2, 50, 64, [0], 2),                   # a sequence of length 0: o = 0
    ]
    if not interp:
        cases += [(16, 32, 8, 4097, 128, None, None), (1, 32, 8, 131072, 128, None, None)]
    for dtype in dtypes:
        for B, Hq, Hkv, L, D, lens, splits in cases:
            q = torch.randn(B, Hq, D, device=device).to(dtype)
            k, v = (torch.randn(B, Hkv, L, D, device=device).to(dtype) for _ in range(2))
            lens = torch.tensor(lens, dtype=torch.int32) if lens is not None else \
                torch.randint(1, L + 1, (B,), dtype=torch.int32)
            _check(f"B={B} Hq={Hq} Hkv={Hkv} L_max={L} D={D} splits={splits} {dtype}",
                   q, k, v, lens.to(device), num_splits=splits)
    print("flash_decode: all checks passed")


# --------------------------------------------------------------------------------------------
# Benchmark (GPU): K and V bytes read per second, against SDPA's backends and the copy ceiling.
#   bytes = 2 (K and V) * B * Hkv * L * D * element size; GB/s = bytes / time.
# Decoding reads the whole cache once per step and does ~2 FLOPs per byte: it is bound by HBM
# bandwidth, and the measured copy bandwidth (read + write of a 1 GiB buffer) is its ceiling.
# --------------------------------------------------------------------------------------------


def _copy_gbs():
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * src.numel() * 4 / ms / 1e6


def _sdpa_ms(q, k, v):
    """{backend: ms} for the SDPA backends that run this decode step (q as one query row)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q4 = q[:, :, None, :]                              # (B, Hq, 1, D)
    gqa = q.shape[1] != k.shape[1]
    out = {}
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                    SDPBackend.EFFICIENT_ATTENTION):
        try:
            with sdpa_kernel(backend):
                fn = (lambda: F.scaled_dot_product_attention(q4, k, v, enable_gqa=gqa))
                fn()
                out[backend.name.lower()] = triton.testing.do_bench(fn, return_mode="median")
        except RuntimeError:
            continue
    return out


def bench(lengths=(4096, 8192, 16384, 32768, 65536, 131072), kv_heads=(32, 8), B=8, Hq=32,
          D=128, sweep=False, plot=None, json_path=None):
    import json

    dtype = torch.float16
    copy = _copy_gbs()
    print(f"copy bandwidth (1 GiB, read + write): {copy:.0f} GB/s. "
          f"GB/s = 2 * B * Hkv * L * D * 2 bytes / time; fractions are of the copy bandwidth")
    print(f"{'Hkv':>4} {'L':>7} {'splits':>6} {'mine GB/s':>10} {'frac':>5} "
          f"{'cudnn':>6} {'flash':>6} {'effic':>6} {'mine/best SDPA':>15} {'x vs 1 split':>12}")
    rows = []
    for Hkv in kv_heads:
        for L in lengths:
            q = torch.randn(B, Hq, D, device="cuda", dtype=dtype)
            k, v = (torch.randn(B, Hkv, L, D, device="cuda", dtype=dtype) for _ in range(2))
            lens = torch.full((B,), L, dtype=torch.int32, device="cuda")
            out = flash_decode(q, k, v, lens).float()
            err = max((out[b] - decode_reference(q[b:b + 1], k[b:b + 1], v[b:b + 1],
                                                 lens[b:b + 1])[0]).abs().max().item()
                      for b in range(B))    # one sequence at a time: the reference is float32
            assert err < 1e-2, f"Hkv={Hkv} L={L}: max abs error {err:.2e}: not timing a wrong kernel"
            nbytes = 2 * B * Hkv * L * D * q.element_size()
            configs = {"default": {}}
            if sweep and L >= 32768:   # tiles, warps and stages; then split counts
                for bn in (32, 64, 128):
                    for w in (4, 8):
                        for st in (2, 3, 4):
                            configs[f"BLOCK_N={bn} warps={w} stages={st}"] = dict(
                                BLOCK_N=bn, num_warps=w, num_stages=st)
                for splits in (2, 4, 8, 16, 32, 64, 128):
                    configs[f"splits={splits}"] = dict(num_splits=splits)
            times = {}
            for name, kw in configs.items():
                try:
                    times[name] = triton.testing.do_bench(
                        lambda: flash_decode(q, k, v, lens, **kw), return_mode="median")
                except Exception as e:  # noqa: BLE001 - out of resources: skip that config
                    print(f"      {name}: {type(e).__name__}")
            best = min(times, key=times.get)
            ms = times["default"]
            one = triton.testing.do_bench(lambda: flash_decode(q, k, v, lens, num_splits=1),
                                          return_mode="median")
            sdpa = _sdpa_ms(q, k, v)
            gbs = {name: nbytes / t / 1e6 for name, t in sdpa.items()}
            mine = nbytes / ms / 1e6
            best_sdpa = max(gbs.values()) if gbs else float("nan")
            splits = pick_num_splits(B, Hkv, L, launch_config(D, 2, q.device)[0], q.device)
            print(f"{Hkv:>4} {L:>7} {splits:>6} {mine:>10.0f} {mine / copy:>5.2f} "
                  + " ".join(f"{gbs.get(b, float('nan')) / copy:>6.2f}"
                             for b in ("cudnn_attention", "flash_attention", "efficient_attention"))
                  + f" {mine / best_sdpa:>15.2f} {one / ms:>12.1f}")
            if sweep:
                print(f"      best of {len(times)}: {best}: {nbytes / times[best] / 1e6:.0f} GB/s "
                      f"({nbytes / times[best] / 1e6 / copy:.2f} of copy)")
            rows.append({"Hkv": Hkv, "L": L, "B": B, "Hq": Hq, "D": D, "splits": splits,
                         "mine_gbs": mine, "copy_gbs": copy, "sdpa_gbs": gbs,
                         "one_split_ms": one, "ms": ms,
                         "best_config": best, "best_gbs": nbytes / times[best] / 1e6})
            del q, k, v, out
            torch.cuda.empty_cache()
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(kv_heads), figsize=(6 * len(kv_heads), 4), squeeze=False)
        for ax, Hkv in zip(axes[0], kv_heads):
            rs = [r for r in rows if r["Hkv"] == Hkv]
            Ls = [r["L"] for r in rs]
            ax.plot(Ls, [r["mine_gbs"] for r in rs], "o-", label="flash_decode")
            for b in ("cudnn_attention", "flash_attention"):
                ax.plot(Ls, [r["sdpa_gbs"].get(b, float("nan")) for r in rs], "s--", label=f"SDPA {b}")
            ax.axhline(copy, color="k", lw=1, label="copy (read + write)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("L (keys per sequence)")
            ax.set_ylabel("GB/s of K and V read")
            ax.set_title(f"B={B}, Hq={Hq}, Hkv={Hkv}, D={D}, fp16")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        print(f"wrote {plot}")
    return rows


if __name__ == "__main__":
    if "--bench" in sys.argv:
        if not torch.cuda.is_available():
            sys.exit("--bench needs a CUDA GPU")
        args = sys.argv[1:]
        opt = (lambda flag: args[args.index(flag) + 1] if flag in args else None)
        bench(sweep="--sweep" in args, plot=opt("--plot"), json_path=opt("--json"))
        sys.exit(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit(f"No GPU found: run on the CPU with TRITON_INTERPRET=1 python {sys.argv[0]}")
    _self_check(device)
