"""flash_triton's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Band, Check as _C, Exercise, OVERFLOW

EXERCISE = Exercise(
    "flash_triton", "FlashAttention forward (Triton)", frozenset({"torch", "triton"}), "interp",
    kernels={"flash_fwd": ("flash_fwd(q, k, v)", "_flash_fwd[grid](...)", "the attention")},
    audit="triton",
    seconds={"adversarial": 13, "interp": 20},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=4,
    # the lesson: "within 1.5 to 3x of a production backend is a good result"
    bands={"vs_sdpa": Band(3.0, 6.0, "flash_fwd time / the fastest SDPA backend's time")})

CHECKS = [
    _C("flash_triton.uses_kernel", "adversarial", 1, "flash_fwd launches its Triton kernel, which stores the whole output",
       "flash_fwd must compute with _flash_fwd and store every output element; calling SDPA, "
       "matmul or softmax from PyTorch, or a kernel that stores nothing, earns nothing."),
    _C("flash_triton.guard_bands", "adversarial", 3, "no load or store past the end of q, k, v or the output",
       "Break It 3: a K or V load without mask= reads past the end of the tensor, and an O "
       "store without mask= writes past it; every lane of every access is checked here.",
       follows=("flash_triton.uses_kernel",)),
    _C("flash_triton.matches_reference", "interp", 5, "flash_fwd matches float64 for B, H > 1, D in {16, 32, 64, 128}",
       "FlashAttention forward: q tile once; per K/V block s = dot(q, k) * scale, m_new, "
       "p = exp(s - m_new), alpha = exp(m_i - m_new), l_i = l_i*alpha + sum(p), acc = "
       "acc*alpha + dot(p, v), m_i = m_new; finally acc / l_i. Is the 1/sqrt(D) scale there?",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands")),
    _C("flash_triton.max_in_last_block", "adversarial", 2, "correct when the row max sits in the last key block",
       "Break It 2 on the GPU kernel: when the row max moves to a later block, what was summed "
       "must move to the new max: alpha = exp(m_i - m_new), acc * alpha[:, None] before adding "
       "dot(p, v), l_i * alpha, then m_i = m_new.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.large_scores")),
    _C("flash_triton.large_scores", "adversarial", 2, "scores that overflow exp, and scores that are all strongly negative",
       "The running max keeps exp in range: start it at -inf (not 0) and use p = exp(s - "
       "m_new[:, None]), never exp(s).",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference"),
       evidence=OVERFLOW),
    _C("flash_triton.float32_input", "interp", 1, "flash_fwd on float32 input gives float32 output",
       "The kernel must take float32 too: cast p to v's dtype before tl.dot and store in "
       "O.dtype.element_ty; nothing may assume a 16-bit input.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.padded_keys_masked", "adversarial", 2, "padded keys get no weight",
       "Break It 3, second half: padded keys loaded as zeros still score 0, not -inf, and "
       "exp(0 - m) gives them real weight. Set s to -inf where cols >= N with tl.where.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.matches_reference", "flash_triton.max_in_last_block",
                "flash_triton.large_scores")),
    _C("flash_triton.ragged_n", "interp", 4, "N not a multiple of BLOCK_N, N smaller than a block, BLOCK_M != BLOCK_N",
       "The last blocks are partial: the key loop must reach the partial block (range(0, N, "
       "BLOCK_N)), the grid must hold cdiv(N, BLOCK_M) query blocks, keys past N score -inf, "
       "and the Q load and O store are masked on rows < N.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores")),
    _C("flash_triton.gpu_real_sizes", "gpu", 5, "flash_fwd on the GPU: N up to 16K, ragged N, several D, fp16 and bf16",
       "Mask loads on cols < N and rows < N, -inf for padded scores, rescale acc by alpha, "
       "divide by l_i at the end, and store in the output dtype.",
       follows=("flash_triton.uses_kernel", "flash_triton.guard_bands",
                "flash_triton.padded_keys_masked", "flash_triton.matches_reference",
                "flash_triton.max_in_last_block", "flash_triton.large_scores",
                "flash_triton.ragged_n", "flash_triton.float32_input")),
    _C("flash_triton.sanitizer", "gpu", 2, "compute-sanitizer finds no out-of-bounds access",
       "Break It 3: every tl.load and tl.store past the end of a tensor needs a mask, even "
       "when the result happens to look right.", follows=("flash_triton.guard_bands",)),
    _C("flash_triton.speed_vs_sdpa", "perf", 5, "flash_fwd within 1.5-3x of the fastest SDPA backend",
       "Measure: tiles of 64 or 128, num_warps 4 or 8, a cast of p to the input dtype before "
       "tl.dot so the tensor cores run; the best tiles depend on the chip's shared memory.",
       follows=("flash_triton.uses_kernel", "flash_triton.gpu_real_sizes")),
    _C("flash_triton.memory_flat", "perf", 2, "extra memory of flash_fwd stays flat in N",
       "FlashAttention never writes S or P: beyond the output its extra memory is a few "
       "numbers per row, at every N.",
       follows=("flash_triton.uses_kernel", "flash_triton.gpu_real_sizes")),
]
