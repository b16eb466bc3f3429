"""Cheat (issue 18, "a kernel body must be Triton"): under the interpreter a loaded block is a
NumPy array behind `.handle.data`, so this kernel computes the softmax with NumPy through the
array's own methods and operators, in place (no name the kernel reads is foreign, no
attribute is set), and stores the result.
Every load and store is in bounds and no torch op runs; only Triton's compiler, which has no
array behind a block, refuses it."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    data = x.handle.data
    e = 2.718281828459045 ** (data - data.max())
    data[:] = e / e.sum()
    tl.store(out_ptr + row * out_stride + cols, x, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                              BLOCK=triton.next_power_of_2(n_cols))
    return out
