from tests.mutants import Mutant

_LOAD = 'x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=float("-inf"))'
_LAUNCH = ("    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=BLOCK,\n"
           "                              out_row_stride=out.stride(0))\n"
           "    return out")

MUTANTS = [
    Mutant("padding_loaded_as_zero", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace('other=float("-inf")', "other=0.0"),
           checks=("softmax_triton.all_negative_rows",), idea="other"),
    # Break It 1: tl.exp(x) directly. The kernel still computes in float32, so only inputs
    # past 88.7 overflow; the check's spiked rows reach them.
    Mutant("no_max_subtraction", "softmax_triton",
           find="num = tl.exp(x - x_max)", replace="num = tl.exp(x)",
           checks=("softmax_triton.fp16_scaled_rows",), idea="max"),
    # Break It 3's mistake in this kernel. With other kept, Triton refuses the load (`other`
    # cannot be provided without `mask`): status error.
    Mutant("load_without_mask", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace("mask=mask, ", ""),
           checks=("softmax_triton.matches_float64",), idea="mask"),
    # ... and with other dropped too, each row reads into the next one, and the last row into
    # the guard band of NaN behind the input
    Mutant("load_without_mask_or_other", "softmax_triton",
           find=_LOAD, replace=_LOAD.replace(', mask=mask, other=float("-inf")', ""),
           checks=("softmax_triton.matches_float64",), idea="mask"),
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
           checks=("softmax_triton.matches_float64",), idea="row stride"),
]
