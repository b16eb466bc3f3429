"""Cheat (issue 18, "the answer rides in launch scalars"): the wrapper reads x through NumPy
(x.numpy() shares its memory and dispatches no torch op), computes each row's max and sum there,
and passes them to the kernel as plain floats. The kernel reads x and writes exp(x - m) / l, so
the answer is what the recorded launch computes from the call's inputs, and a replay on the same
inputs agrees to the bit. Up to 8 rows fit in the grader's 16 distinct launch floats; a replay
on fresh inputs still divides by the old rows' sums."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_exp(out_ptr, in_ptr, row_stride, n_cols,
                m0, m1, m2, m3, m4, m5, m6, m7, l0, l1, l2, l3, l4, l5, l6, l7,
                BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * row_stride + cols, mask=cols < n_cols, other=-float("inf"))
    m = tl.where(row == 0, m0, tl.where(row == 1, m1, tl.where(row == 2, m2, tl.where(
        row == 3, m3, tl.where(row == 4, m4, tl.where(row == 5, m5, tl.where(row == 6, m6, m7)))))))
    s = tl.where(row == 0, l0, tl.where(row == 1, l1, tl.where(row == 2, l2, tl.where(
        row == 3, l3, tl.where(row == 4, l4, tl.where(row == 5, l5, tl.where(row == 6, l6, l7)))))))
    y = tl.exp(x.to(tl.float32) - m) / s
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    rows = x.detach().cpu().numpy().astype(np.float64)
    m = rows.max(axis=1)
    l = np.exp(rows - m[:, None]).sum(axis=1)
    ms = [float(v) for v in m[:8]] + [0.0] * (8 - min(8, len(m)))
    ls = [float(v) for v in l[:8]] + [1.0] * (8 - min(8, len(l)))
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(n_cols)
    _scaled_exp[(n_rows,)](out, x, x.stride(0), n_cols, *ms, *ls, BLOCK=BLOCK)
    return out
