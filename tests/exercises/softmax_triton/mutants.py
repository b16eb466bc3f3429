from tests.cases import Mutant

_LOAD = 'x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=float("-inf"))'
_STORE = "tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)"
_LAUNCH = ("    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=BLOCK,\n"
           "                              out_row_stride=out.stride(0))\n"
           "    return out")
_MAX = "    x_max = tl.max(x, axis=0)\n"

MUTANTS = [
    Mutant("padding_loaded_as_zero", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace('other=float("-inf")', "other=0.0"),
           checks=("softmax_triton.all_negative_rows",), idea="other"),
    # Break It 1: tl.exp(x) directly. The kernel still computes in float32, so only inputs
    # past 88.7 overflow; the check's spiked rows reach them.
    Mutant("no_max_subtraction", "softmax_triton",
           find="num = tl.exp(x - x_max)", replace="num = tl.exp(x)",
           checks=("softmax_triton.fp16_scaled_rows",), idea="max"),
    # With other kept, Triton refuses the load (`other` cannot be provided without `mask`):
    # the kernel cannot run at all, which uses_kernel reports with Triton's message.
    Mutant("load_without_mask", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace("mask=mask, ", ""),
           checks=("softmax_triton.uses_kernel",), idea="mask"),
    # ... with other dropped too, each row reads into the next one and the last row past x
    Mutant("load_without_mask_or_other", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace(', mask=mask, other=float("-inf")', ""),
           checks=("softmax_triton.masked_accesses",), idea="mask"),
    # Break It 3 in this kernel, hidden by tl.where: the values come out right, the read past
    # the end of x is still caught
    Mutant("load_without_mask_then_where", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace(', mask=mask, other=float("-inf")', "")
           + '\n    x = tl.where(mask, x, float("-inf"))',
           checks=("softmax_triton.masked_accesses",), idea="mask"),
    # the last row writes past the end of the output
    Mutant("store_without_mask", "softmax_triton",
           find=_STORE, replace=_STORE.replace(", mask=mask", ""),
           checks=("softmax_triton.masked_accesses",), idea="store"),
    Mutant("torch_softmax_in_wrapper", "softmax_triton",
           find=_LAUNCH, replace="    return torch.softmax(x, dim=1)",
           checks=("softmax_triton.uses_kernel",), idea="softmax_kernel"),
    # launching the kernel is not enough: no computing torch op may run beside it
    Mutant("eager_after_launch", "softmax_triton",
           find=_LAUNCH, replace=_LAUNCH.replace("return out", "return softmax_eager(x)"),
           checks=("softmax_triton.uses_kernel",), idea="softmax_kernel"),
    # rows addressed by their width, not their stride: right for contiguous input only
    Mutant("row_stride_ignored", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace("row * row_stride", "row * n_cols"),
           checks=("softmax_triton.strided_rows",), idea="stride"),
    # the lesson's launch: one row stride for input and output
    Mutant("one_stride_for_both", "softmax_triton",
           find="                              out_row_stride=out.stride(0))\n",
           replace=")\n",
           checks=("softmax_triton.strided_rows",), idea="out.stride(0)"),
    # no division by the sum
    Mutant("no_division", "softmax_triton",
           find="    y = num / den\n", replace="    y = num\n",
           checks=("softmax_triton.matches_float64",), idea="divide"),
    # a kernel that only handles 16-bit input
    Mutant("asserts_16_bit_input", "softmax_triton",
           find="    n_rows, n_cols = x.shape\n",
           replace="    n_rows, n_cols = x.shape\n"
                   "    assert x.dtype in (torch.float16, torch.bfloat16), 'fp16/bf16 only'\n",
           checks=("softmax_triton.float32_input",), idea="float32"),
]
