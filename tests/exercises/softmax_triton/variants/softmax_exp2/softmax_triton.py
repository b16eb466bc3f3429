"""Correct, in another style: exp2 with log2(e) folded in, the max taken on the scaled row, and
the reciprocal of the sum multiplied in; the output stride passed on its own."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x * 1.4426950408889634
    z = z - tl.max(z, axis=0)
    num = tl.math.exp2(z)
    inv = 1.0 / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, (num * inv).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return y
