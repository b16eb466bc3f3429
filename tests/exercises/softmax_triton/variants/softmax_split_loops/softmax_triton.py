"""Correct, in another style: rows wider than one tile. The kernel walks each row in chunks of
BLOCK columns twice: an online pass for the running max and sum (rescaled when the max moves),
then a pass that writes exp(x - m) / l. Every chunk's load and store is masked."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    in_row = in_ptr + row * in_stride
    out_row = out_ptr + row * out_stride
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    l = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have seen only padding keep m = -inf: no exp(-inf - -inf)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        l = l * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    m_row = tl.max(m, axis=0)
    l_row = tl.sum(tl.where(m == -float("inf"), 0.0, l * tl.exp(m - m_row)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m_row) / l_row
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK = min(256, triton.next_power_of_2(n_cols))
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=BLOCK)
    return out
