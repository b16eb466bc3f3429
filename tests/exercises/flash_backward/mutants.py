"""flash_backward's mistakes (issue 12), as edits to solutions/flash_backward.py: each loses the
check aimed at it, and that check's hint (the failure's own, else the registry's) names the idea."""

from tests.cases import Mutant

DS = "ds = p * (dp - delta[:, None])                                   # dS = P * (dP - D)\n"
BWD_MASK = ("            valid = valid & (cols[None, :] <= rows[:, None])\n"
            "        p = tl.where(valid, p, 0.0)\n")
DK = "        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)                        # dK = dS^T Q\n"
RECOMPUTE = "        # recompute instead of remember: P = exp(S - L), from the L the forward saved\n"
DQ_LAUNCH = ("    _bwd_dq[(triton.cdiv(N, BLOCK_M), B * H)](\n"
             "        q, k, v, do, lse, delta, dq, N, q.stride(0), q.stride(1), scale,\n"
             "        CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D,\n"
             "        num_warps=num_warps, num_stages=num_stages)\n")

MUTANTS = [
    # the causal mask off by one: the diagonal hidden, so row 0 sees no key at all
    Mutant("causal_strict", "flash_backward",
           find="valid = valid & (cols[None, :] <= rows[:, None])             # key j visible iff j <= i",
           replace="valid = valid & (cols[None, :] < rows[:, None])",
           checks=("flash_backward.causal_mask",), idea="j <= i"),
    # the unmasked loop runs up to the query block's first row, not to the last key block that
    # ends before it: with BLOCK_M < BLOCK_N a block that crosses the diagonal goes unmasked
    Mutant("diagonal_block_unmasked", "flash_backward",
           find="full = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N", replace="full = pid_m * BLOCK_M",
           checks=("flash_backward.causal_mask",), idea="BLOCK_M != BLOCK_N"),
    # L = log(l): the running max left out
    Mutant("lse_without_m", "flash_backward",
           find="lse = (m_i + tl.log2(l_i)) * 0.6931471805599453",
           replace="lse = tl.log2(l_i) * 0.6931471805599453",
           checks=("flash_backward.lse_includes_m",), idea="m + log(l)"),
    # exp2 inside, and L returned in log2 units: the ln(2) conversion forgotten
    Mutant("lse_in_log2", "flash_backward",
           find="lse = (m_i + tl.log2(l_i)) * 0.6931471805599453",
           replace="lse = m_i + tl.log2(l_i)",
           checks=("flash_backward.lse_includes_m",), idea="ln(2)"),
    # the D trick left out: D = 0, so dS = P * dP
    Mutant("delta_missing", "flash_backward",
           find="tl.store(Delta + pid_bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)",
           replace="tl.store(Delta + pid_bh * N + rows, tl.sum(o * do, axis=1) * 0.0, mask=rows < N)",
           checks=("flash_backward.backward_matches_float64",), idea="D trick"),
    # P rebuilt from the tile's own max, as if the forward's running max were needed, not L
    Mutant("p_from_running_max", "flash_backward",
           find="p = tl.exp2(s * qk_scale - lse[:, None] * 1.4426950408889634)\n",
           replace="p = tl.exp2(s * qk_scale - tl.max(s * qk_scale, axis=1)[:, None])\n",
           also=(("p = tl.exp2(s * qk_scale - lse[:, None] * 1.4426950408889634)   # P = exp(S - L)",
                  "p = tl.exp2(s * qk_scale - tl.max(s * qk_scale, axis=1)[:, None])"),),
           checks=("flash_backward.backward_matches_float64",), idea="exp(S - L)"),
    # S = scale * Q K^T, and the scale forgotten in dK
    Mutant("dk_without_scale", "flash_backward",
           find="    dk = dk * scale ", replace="    dk = dk ",
           checks=("flash_backward.backward_matches_float64",), idea="multiplies dK"),
    # ... or in dQ
    Mutant("dq_without_scale", "flash_backward",
           find="    dq = dq * scale\n", replace="    dq = dq\n",
           checks=("flash_backward.backward_matches_float64",), idea="multiplies dQ"),
    # Break It 3 carried over: the forward's K load without its mask (the -inf on the scores
    # hides what it read); the bounds hooks record the lanes past the end of k
    Mutant("k_load_unmasked", "flash_backward",
           find="    k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None],\n"
                "                mask=cols[None, :] < N, other=0.0)",
           replace="    k = tl.load(K + base + cols[None, :] * stride_n + dims[:, None])",
           checks=("flash_backward.masked_accesses",), idea="mask"),
    # "dS cast to fp16 before the multiply by P": dP - D rounded to float16, so past 65504 it is
    # inf (dP itself reaches ~1e5 with a large dO while dS = P * (dP - D) stays in range)
    Mutant("ds_fp16_before_p", "flash_backward",
           find=DS + "        dk +=", replace="ds = p * (dp - delta[:, None]).to(q.dtype)\n        dk +=",
           also=((DS + "        dq +=", "ds = p * (dp - delta[:, None]).to(k.dtype)\n        dq +="),),
           checks=("flash_backward.ds_precision",), idea="float32"),
    # dQ summed across programs without atomics: each key block's program adds its share of dQ
    # into a float32 dQ with tl.load (with the other loads, at the top of the loop) + tl.store
    # (once dS is known). Non-causal, every key block's program walks the query blocks in step
    # with the others, so their loads and stores interleave. The interpreter runs programs one after
    # another, so this is right on the CPU layers (checks=(): it must get full marks there);
    # on a GPU the programs race and updates are lost (tools/gpu_mutants.py, gpu=...).
    # variants/flash_bwd_atomic_dq is the correct version, with tl.atomic_add.
    Mutant("dq_race", "flash_backward",
           find="def _bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, N,",
           replace="def _bwd_dkdv(Q, K, V, DO, LSE, Delta, DK, DV, DQ, N,",
           also=((RECOMPUTE, "        dq_ptrs = DQ + base + rows[:, None] * stride_n + dims[None, :]\n"
                             "        dq_sum = tl.load(dq_ptrs, mask=rows[:, None] < N, other=0.0)\n"
                             + RECOMPUTE),
                 (DK, DK + "        tl.store(dq_ptrs, dq_sum + tl.dot(ds.to(k.dtype), k) * scale,\n"
                           "                 mask=rows[:, None] < N)\n"),
                 ("    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)\n",
                  "    dq = torch.zeros(q.shape, device=q.device, dtype=torch.float32)\n"
                  "    dk, dv = torch.empty_like(k), torch.empty_like(v)\n"),
                 ("q, k, v, do, lse, delta, dk, dv, N,", "q, k, v, do, lse, delta, dk, dv, dq, N,"),
                 (DQ_LAUNCH, "    dq = dq.to(q.dtype)\n")),
           checks=(), gpu=("flash_backward.gpu_real_sizes",), idea="atomic"),
    # L = m: the log of the row sum forgotten (the autograd wrapper's backward then gets it too)
    Mutant("lse_is_m", "flash_backward",
           find="lse = (m_i + tl.log2(l_i)) * 0.6931471805599453",
           replace="lse = m_i * 0.6931471805599453",
           checks=("flash_backward.lse_includes_m",), idea="m + log(l)"),
    # the D trick with the wrong factor: dO * dO instead of dO * O
    Mutant("d_from_do", "flash_backward",
           find="tl.store(Delta + pid_bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)",
           replace="tl.store(Delta + pid_bh * N + rows, tl.sum(do * do, axis=1), mask=rows < N)",
           checks=("flash_backward.backward_matches_float64",), idea="rowsum(dO * O)"),
    Mutant("dq_scaled_twice", "flash_backward",
           find="    dq = dq * scale\n", replace="    dq = dq * scale * scale\n",
           checks=("flash_backward.backward_matches_float64",), idea="applied twice in dQ"),
    # the backward kernels alone hide the diagonal (j < i); the forward is right
    Mutant("bwd_causal_strict", "flash_backward",
           find=BWD_MASK + "        dv +=", replace=BWD_MASK.replace("<=", "<") + "        dv +=",
           also=((BWD_MASK + "        dp =", BWD_MASK.replace("<=", "<") + "        dp ="),),
           checks=("flash_backward.backward_causal",), idea="j <= i"),
]
