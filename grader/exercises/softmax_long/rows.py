"""softmax_long's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows). An extension exercise: its points
come on top of the core's 100."""

from grader.schema import Band, Check as _C, Exercise, OVERFLOW

EXERCISE = Exercise(
    "softmax_long", "Softmax for rows of any length (Triton)", frozenset({"torch", "triton"}),
    "interp", track="extension",
    kernels={"softmax": ("softmax(x)", "its Triton kernels (softmax_rows_kernel, "
                         "softmax_online_kernel or your own)",
                         "the max, the sum of exponentials and the output")},
    audit="triton",
    seconds={"adversarial": 10, "interp": 12},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=10,
    # a fused softmax of short rows moves what a copy moves (read MN, write MN); the online one
    # reads long rows twice, the second time mostly from L2: from DRAM alone that would be 2/3 of
    # a copy's GB/s, so its full marks start lower (the solution: 0.65 to 0.79 on an H200 at 64K
    # columns). torch.softmax, timed in the same run, is the production baseline: full marks at
    # its speed, none at a third of it.
    bands={"bandwidth": Band(0.75, 0.2, "GB/s read + written / the copy bandwidth measured in this run"),
           "bandwidth_long": Band(0.6, 0.2, "the same for rows longer than one tile (read twice)"),
           "vs_torch": Band(1.0, 3.0, "softmax time / torch.softmax time")})

# the checks whose ideas explain a wrong answer anywhere else (the most specific first)
ANSWER_IDEAS = ("softmax_long.max_in_last_block", "softmax_long.neg_inf_blocks",
                "softmax_long.fp16_large_values", "softmax_long.all_negative_rows")
_BASE = ("softmax_long.uses_kernel", "softmax_long.masked_accesses")

CHECKS = [
    # Every check of a Triton exercise passes only when the student's kernel computed the answer
    # (grader.fixtures.ProvingSubmission, grader.judge.source.audit); `uses_kernel` is the check that says so.
    _C("softmax_long.uses_kernel", "adversarial", 1,
       "softmax launches Triton kernels, which compute and store the whole output",
       "softmax(x) must compute with its Triton kernels and store every output element; "
       "torch.softmax or exp in the wrapper, or a kernel that stores nothing, earns nothing."),
    _C("softmax_long.masked_accesses", "adversarial", 2,
       "no load or store past the end of a row or past the last row (ragged last block and tile)",
       "Mask every load and store: cols < n_cols in each column block (the last one is short), "
       "and rows < n_rows when a program holds several rows.",
       follows=("softmax_long.uses_kernel",)),
    _C("softmax_long.max_in_last_block", "adversarial", 3,
       "long rows whose max sits in the last column block, or rises block after block",
       "The online softmax: when a block raises the max, the sum so far was measured against the "
       "old max: l = l * exp(m_old - m_new) + sum(exp(x - m_new)). Without the rescale the "
       "output is right until the max moves.", follows=_BASE),
    _C("softmax_long.neg_inf_blocks", "adversarial", 2,
       "rows holding -inf entries, whole column blocks of -inf included, give no nan",
       "A block of only -inf leaves m_new = -inf, and exp(-inf - (-inf)) is nan: shift by 0 "
       "where m_new is -inf (tl.where), so the block adds exp(-inf) = 0 and l stays 0.",
       follows=(*_BASE, "softmax_long.max_in_last_block")),
    _C("softmax_long.fp16_large_values", "adversarial", 2,
       "float16 rows with values past 88, short and long, give no inf or nan",
       "Break It 1 on both paths: exp overflows float32 above 88.7 and inf / inf is nan. "
       "Subtract the running max (long rows) or the row max (short rows) before tl.exp.",
       follows=(*_BASE, "softmax_long.max_in_last_block"),
       evidence=OVERFLOW),
    _C("softmax_long.all_negative_rows", "adversarial", 2,
       "rows of values near -200 with ragged widths",
       "m starts at -inf and padded lanes load as -inf: a max that starts at 0 (or padding read "
       "as 0) makes exp(x - 0) underflow to 0 for a row far below 0, and 0 / 0 is nan.",
       follows=(*_BASE, "softmax_long.max_in_last_block")),
    _C("softmax_long.matches_float64", "interp", 3,
       "long rows (column blocks of 32 or 64) at awkward widths: 1, 2, just over a block, ragged",
       "One program per long row: the online pass over blocks of BLOCK columns (masked, "
       "other=-inf), then a second pass writing exp(x - m) / l in the output's dtype.",
       follows=(*_BASE, *ANSWER_IDEAS)),
    _C("softmax_long.short_rows", "interp", 2,
       "short rows, several per program, with a row count no tile divides",
       "rows = program_id(0) * ROWS + arange(ROWS), a (ROWS, BLOCK) tile masked on rows < n_rows "
       "and cols < n_cols, max and sum along axis 1.",
       follows=(*_BASE, *ANSWER_IDEAS)),
    _C("softmax_long.float32_rows", "interp", 2,
       "float32 rows, float32 out, at float32's tolerance",
       "Keep m and l in float32 whatever the input (never accumulate in float16), and store in "
       "the output's dtype (out_ptr.dtype.element_ty).",
       follows=(*_BASE, *ANSWER_IDEAS, "softmax_long.matches_float64")),
    _C("softmax_long.strided_rows", "interp", 1,
       "a row-strided input (a column slice of a wider tensor), short and long rows",
       "Row r of x starts at r * x.stride(0), and row r of the contiguous output at "
       "r * out.stride(0): pass both strides to the kernels.",
       follows=(*_BASE, *ANSWER_IDEAS, "softmax_long.matches_float64",
                "softmax_long.short_rows")),
    _C("softmax_long.gpu_real_sizes", "gpu", 4,
       "softmax on the GPU from 1 to 256K columns, ragged widths, fp16/bf16/fp32",
       "Your own BLOCK from n_cols: one tile while a row fits, the online pass over blocks "
       "beyond; masks on every load and store, m and l in float32, int64 row offsets.",
       follows=(*_BASE, *ANSWER_IDEAS, "softmax_long.matches_float64", "softmax_long.short_rows",
                "softmax_long.float32_rows", "softmax_long.strided_rows")),
    _C("softmax_long.sanitizer", "gpu", 1, "compute-sanitizer finds no out-of-bounds access",
       "Every tl.load and tl.store needs its mask (cols < n_cols, rows < n_rows), even when the "
       "result happens to look right.", follows=("softmax_long.masked_accesses",)),
    _C("softmax_long.bandwidth", "perf", 4,
       "GB/s against the copy bandwidth and time against torch.softmax at 256, 4K and 64K columns",
       "Short rows: several per program so each moves enough bytes; rows up to a few thousand "
       "columns in one tile, in registers; longer rows read twice, the second time from L2 "
       "(one row per program, few programs per SM). Pick BLOCK and num_warps from n_cols.",
       follows=("softmax_long.uses_kernel", "softmax_long.gpu_real_sizes")),
]
