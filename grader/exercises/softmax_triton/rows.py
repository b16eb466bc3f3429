"""softmax_triton's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Band, Check as _C, Exercise, OVERFLOW

EXERCISE = Exercise(
    "softmax_triton", "Fused softmax (Triton)", frozenset({"torch", "triton"}), "interp",
    kernels={"softmax": ("softmax(x)", "softmax_kernel[(n_rows,)](...)",
                         "the max, exp, sum and divide")},
    audit="triton",
    seconds={"adversarial": 10, "interp": 12},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=3,
    # counting passes gives about 4x over softmax_eager (eager reads 5 MN and writes 3 MN
    # elements, fused reads MN and writes MN)
    bands={"bandwidth": Band(0.6, 0.15, "GB/s read + written / the copy bandwidth measured in this run"),
           "vs_eager": Band(2.0, 1.0, "softmax_eager time / softmax time")},
    device_bands={"unknown": {"bandwidth": Band(0.5, 0.15, "GB/s read + written / the copy "
                                                          "bandwidth measured in this run")}})

CHECKS = [
    # Every check of a Triton exercise passes only when the student's kernel computed the answer
    # (grader.fixtures.ProvingSubmission, grader.judge.source.audit); `uses_kernel` is the check that says so.
    _C("softmax_triton.uses_kernel", "adversarial", 1, "softmax launches its Triton kernel, which stores the whole output",
       "softmax(x) must compute with softmax_kernel and store every output element; calling "
       "torch.softmax or exp inside the wrapper, or a kernel that stores nothing, earns nothing."),
    _C("softmax_triton.masked_accesses", "adversarial", 1, "no load or store past the end of a row (n_cols < BLOCK)",
       "Mask the load and the store with mask = cols < n_cols: without it the last row reads "
       "and writes past the end of the tensor, even when the result happens to look right.",
       follows=("softmax_triton.uses_kernel",)),
    _C("softmax_triton.all_negative_rows", "adversarial", 2, "rows of only negative numbers with n_cols < BLOCK",
       "The padded lanes must load as -inf (other=-inf): with other=0 a row of negatives gets "
       "max 0 and every padded lane adds exp(0) = 1 to the sum.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.matches_float64")),
    _C("softmax_triton.matches_float64", "interp", 2, "softmax matches float64 on awkward shapes (float16, contiguous)",
       "One program per row: load the row (other=-inf past n_cols), subtract the max, exp, "
       "sum, divide in float32, and store in the output's dtype.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses")),
    _C("softmax_triton.float32_input", "interp", 1, "softmax of float32 input gives float32 output",
       "The kernel takes float16, bfloat16 and float32 rows: compute in float32 and store in the "
       "output's dtype (out_ptr.dtype.element_ty); nothing may assume a 16-bit input.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64")),
    _C("softmax_triton.strided_rows", "interp", 1, "a row-strided input (x[:, :500] of a wider tensor)",
       "Row r of x starts at r * x.stride(0), and row r of the contiguous output at "
       "r * out.stride(0): pass both strides to the kernel.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64")),
    _C("softmax_triton.fp16_scaled_rows", "adversarial", 3,
       "float16 rows scaled by 20, some entries past 88, give no inf or nan",
       "Break It 1: exp overflows above 11.09 in float16 and above 88.7 in float32, and "
       "inf / inf is nan. Subtract the row max (in float32) before tl.exp.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64"),
       evidence=OVERFLOW),
    _C("softmax_triton.gpu_real_sizes", "gpu", 3, "softmax on the GPU at real sizes, fp16/bf16/fp32",
       "Mask every load and store; keep the max, exp and sum in float32; the row stride comes "
       "from x.stride(0).",
       follows=("softmax_triton.uses_kernel", "softmax_triton.masked_accesses",
                "softmax_triton.all_negative_rows", "softmax_triton.matches_float64",
                "softmax_triton.float32_input", "softmax_triton.strided_rows",
                "softmax_triton.fp16_scaled_rows")),
    _C("softmax_triton.sanitizer", "gpu", 1, "compute-sanitizer finds no out-of-bounds access",
       "Every tl.load and tl.store of a row needs mask = cols < n_cols, even when the result "
       "happens to look right.", follows=("softmax_triton.masked_accesses",)),
    _C("softmax_triton.bandwidth", "perf", 3, "softmax GB/s against the copy bandwidth, and its speed-up over softmax_eager",
       "A fused softmax reads each element once and writes it once: it should approach the "
       "copy bandwidth, and beat the eager version by about the ratio of HBM passes.",
       follows=("softmax_triton.uses_kernel", "softmax_triton.gpu_real_sizes")),
]
