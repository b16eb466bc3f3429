"""softmax_long in another correct style: each long row split across programs, merged with the
merge rule, and per-lane running states instead of a running scalar (the checks must accept it).

Kernel 1, grid (n_rows, n_splits): each program runs the online softmax over its CHUNK of the
row, one running (m, l) per lane, then folds its lanes into one (m, l) and stores it. Kernel 2,
same grid: each program merges its row's n_splits states (m = max m_s, l = sum l_s exp(m_s - m))
and writes exp(x - m) / l for its chunk. Short rows: one row per program, the row in one tile.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _split_state(m_ptr, l_ptr, in_ptr, n_cols, in_row_stride, n_splits, CHUNK: tl.constexpr,
                 BLOCK: tl.constexpr):
    row, split = tl.program_id(0), tl.program_id(1)
    lo = split * CHUNK
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK,), tl.float32)
    for start in range(lo, lo + CHUNK, BLOCK):
        x = tl.load(in_ptr + row * in_row_stride + start + cols, mask=start + cols < n_cols,
                    other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        l = l * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    m_all = tl.max(m, axis=0)
    shift = tl.where(m_all == float("-inf"), 0.0, m_all)
    tl.store(m_ptr + row * n_splits + split, m_all)
    tl.store(l_ptr + row * n_splits + split, tl.sum(l * tl.exp(m - shift), axis=0))


@triton.jit
def _merge_write(out_ptr, m_ptr, l_ptr, in_ptr, n_cols, in_row_stride, out_row_stride, n_splits,
                 CHUNK: tl.constexpr, BLOCK: tl.constexpr, SPLITS: tl.constexpr):
    row, split = tl.program_id(0), tl.program_id(1)
    s = tl.arange(0, SPLITS)
    m_s = tl.load(m_ptr + row * n_splits + s, mask=s < n_splits, other=float("-inf"))
    l_s = tl.load(l_ptr + row * n_splits + s, mask=s < n_splits, other=0.0)
    m = tl.max(m_s, axis=0)
    shift = tl.where(m == float("-inf"), 0.0, m)
    l = tl.sum(l_s * tl.exp(m_s - shift), axis=0)
    cols = tl.arange(0, BLOCK)
    lo = split * CHUNK
    for start in range(lo, lo + CHUNK, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + start + cols, mask=mask,
                    other=float("-inf")).to(tl.float32)
        y = tl.exp(x - m) / l
        tl.store(out_ptr + row * out_row_stride + start + cols, y.to(out_ptr.dtype.element_ty),
                 mask=mask)


@triton.jit
def _one_row(out_ptr, in_ptr, n_cols, in_row_stride, out_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty),
             mask=mask)


def softmax(x, BLOCK=None, num_warps=None):
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK = BLOCK or (triton.next_power_of_2(n_cols) if n_cols <= 8192 else 4096)
    if n_cols <= BLOCK:
        _one_row[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                            BLOCK=triton.next_power_of_2(n_cols))
        return out
    chunk = 2 * BLOCK                       # each split: two blocks of the row
    n_splits = triton.cdiv(n_cols, chunk)
    m = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    l = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
    _split_state[(n_rows, n_splits)](m, l, x, n_cols, x.stride(0), n_splits, CHUNK=chunk,
                                     BLOCK=BLOCK)
    _merge_write[(n_rows, n_splits)](out, m, l, x, n_cols, x.stride(0), out.stride(0), n_splits,
                                     CHUNK=chunk, BLOCK=BLOCK,
                                     SPLITS=triton.next_power_of_2(n_splits))
    return out
