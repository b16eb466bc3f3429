"""flash_backward's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Band, Check as _C, Exercise

# the forward with L, the backward's three kernels, and the autograd wrapper
EXERCISE = Exercise(
    "flash_backward", "Causal FlashAttention with L, and its backward pass (Triton)",
    frozenset({"torch", "triton"}), "interp", track="extension",
    timed=("flash_fwd", "flash_bwd"),
    kernels={
        "flash_fwd": ("flash_fwd(q, k, v, causal)", "_flash_fwd[grid](...)",
                      "the attention and L"),
        "flash_bwd": ("flash_bwd(q, k, v, o, lse, do, causal)",
                      "_bwd_preprocess, _bwd_dkdv and _bwd_dq[grid](...)", "the gradients"),
        "flash_attention": ("flash_attention(q, k, v, causal).backward(g)",
                            "flash_fwd's and flash_bwd's kernels",
                            "the attention and its gradients"),
    },
    audit="triton",
    seconds={"adversarial": 14, "interp": 25},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=8,
    bands={"vs_sdpa": Band(3.0, 6.0, "time / the fastest SDPA backend's time, forward and backward"),
           # causal attention does half the work; at 8K cuDNN's own ratio is about 0.56-0.62.
           # The solution's backward (the stub's design: one loop, the mask on every tile) reads
           # 0.51-0.65 in most grades but up to 0.74 in some (docs/MEASUREMENTS.md): full marks
           # at 0.6 or 0.7 made its credit move between runs. A kernel that masks without
           # skipping reads about 1
           "causal_half": Band(0.8, 0.95, "causal time / non-causal time")})

CHECKS = [
    _C("flash_backward.forward_matches_float64", "interp", 4,
       "flash_fwd's o and L match float64: ragged N, BLOCK_M != BLOCK_N, fp16 and fp32",
       "The forward of the core exercise, plus one number per row for the backward pass: L = m + "
       "log(l), the logsumexp of the row's scaled scores (natural log), stored as float32.",
       follows=("flash_backward.lse_includes_m",)),
    _C("flash_backward.lse_includes_m", "adversarial", 3,
       "L = m + log(l) with large scores (row maxima ~100) and with flat ones (log(l) ~ log(N))",
       "L = m + log(l): l sums exp(s - m), so log(l) alone is off by m. If you compute in exp2, "
       "convert back to the natural log: L = (m2 + log2(l)) * ln(2)."),
    _C("flash_backward.causal_mask", "interp", 4,
       "causal flash_fwd (key j visible iff j <= i): ragged N, BLOCK_M != BLOCK_N both ways",
       "Key j is visible to query i iff j <= i, the diagonal included. Skip blocks above the "
       "diagonal: the key loop stops at min((pid_m + 1) * BLOCK_M, N), and only the blocks that "
       "cross the diagonal (with any BLOCK_M, BLOCK_N) are masked, on cols <= rows.",
       follows=("flash_backward.lse_includes_m", "flash_backward.forward_matches_float64")),
    _C("flash_backward.backward_matches_float64", "interp", 6,
       "flash_bwd's dq, dk, dv within 2x PyTorch's same-precision error: fp16 and fp32, ragged N",
       "Recompute instead of remember: P = exp(S - L) from the L the forward saved; dV = P^T dO; "
       "dP = dO V^T; the D trick, D = rowsum(dO * O) and dS = P * (dP - D); dQ = scale * dS K and "
       "dK = scale * dS^T Q."),
    _C("flash_backward.backward_causal", "interp", 4,
       "causal flash_bwd: ragged N, BLOCK_M != BLOCK_N both ways",
       "The backward masks P like the forward (key j visible iff j <= i) and skips blocks above "
       "the diagonal: the dK/dV program of a key block starts at the query block holding its "
       "first key, the dQ program of a query block stops its keys at the diagonal.",
       follows=("flash_backward.backward_matches_float64", "flash_backward.causal_mask")),
    _C("flash_backward.autograd_wrapper", "interp", 2,
       "flash_attention(q, k, v, causal).backward(g) gives o and the gradients, causal and not",
       "An autograd.Function: forward runs flash_fwd and saves q, k, v, o and L (recompute "
       "instead of remember: nothing N x N); backward runs flash_bwd and returns (dq, dk, dv, None).",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")),
    _C("flash_backward.gpu_real_sizes", "gpu", 5,
       "o, L and the gradients on the GPU: N up to 4K, causal, D 64 and 128, fp16 and bf16, B, H > 1",
       "The same kernels at real sizes: masks on rows < N and cols < N (and cols <= rows when "
       "causal) in every kernel, one writer per output element (or atomics), float32 "
       "accumulators, and dS = P * (dP - D) in float32, cast only for tl.dot.",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal", "flash_backward.autograd_wrapper",
                "flash_backward.masked_accesses")),
    _C("flash_backward.sanitizer", "gpu", 1,
       "compute-sanitizer finds no out-of-bounds access in flash_fwd or flash_bwd (causal, N = 1000)",
       "Mask every load and store of all four kernels on the rows and keys that exist: a load past "
       "the end is a bug even when tl.where sets those scores to -inf afterwards.",
       follows=("flash_backward.masked_accesses",)),
    _C("flash_backward.forward_speed", "perf", 3,
       "flash_fwd against the fastest SDPA forward, N = 8K, causal and not",
       "Tiles that keep the tensor cores busy (BLOCK_M x BLOCK_N from the device's shared memory), "
       "exp2 with log2(e) folded into the scale, pipelined K and V loads (num_stages)."),
    _C("flash_backward.backward_speed", "perf", 3,
       "flash_bwd against the fastest SDPA backward, N = 8K, causal and not",
       "Recompute instead of remember, with big tiles: one program per key block for dK and dV, "
       "one per query block for dQ (no atomics), P from exp2 and L, and float32 accumulators."),
    _C("flash_backward.causal_skips_blocks", "perf", 2,
       "causal flash_fwd and flash_bwd take at most 0.7 of the non-causal time (N = 8K)",
       "Skip blocks above the diagonal: the forward's and dQ's key loops stop at the diagonal, "
       "dK/dV's query loop starts there; only the blocks that cross it are masked.",
       follows=("flash_backward.forward_speed", "flash_backward.backward_speed")),
    _C("flash_backward.memory_linear", "perf", 2,
       "flash_fwd and flash_bwd allocate nothing N x N (peak CUDA memory beyond the outputs)",
       "Recompute instead of remember: the forward saves o and L, the backward recomputes P tile "
       "by tile; the only extra tensors are per-row numbers (L, D) and perhaps a float32 dQ."),
    _C("flash_backward.masked_accesses", "adversarial", 2,
       "every load and store of flash_fwd and flash_bwd stays inside its tensor (ragged N)",
       "Mask every load and store on the rows and keys that exist (rows < N, cols < N), in the "
       "forward and in all three backward kernels, even where tl.where sets the scores to -inf.",
       follows=("flash_backward.forward_matches_float64", "flash_backward.lse_includes_m",
                "flash_backward.causal_mask", "flash_backward.backward_matches_float64",
                "flash_backward.backward_causal")),
    _C("flash_backward.uses_kernel", "adversarial", 1,
       "flash_fwd and flash_bwd compute with their Triton kernels",
       "The wrappers only allocate and launch: the attention, L, D and the gradients are computed "
       "by your kernels."),
    _C("flash_backward.ds_precision", "adversarial", 2,
       "flash_bwd with a large dO (|dP| past float16's 65504, dS in range): fp16 in, fp32 inside",
       "Compute dP = dO V^T, dP - D and dS = P * (dP - D) in float32 (tl.dot accumulates in "
       "float32) and cast only the operand of tl.dot, dS, to float16: dP can pass float16's 65504 "
       "where dS does not.",
       follows=("flash_backward.backward_matches_float64",)),
]
