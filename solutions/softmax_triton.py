# BEGIN SOLUTION
"""Row softmax as one fused Triton kernel (solution).

Lesson: FlashAttention and kernels, sections "Softmax, the safe way", "Writing a kernel: Triton"
and "Build It" (softmax_triton.py); "Break It" 1 drops the max subtraction in this kernel.

What you will learn:
  - one Triton program per row: load a whole row into registers, reduce it, write it back;
  - why masked lanes are filled with -inf, not 0, when the reduction is a max;
  - why the max is subtracted before the exponential (fp16 overflows at e^11.1);
  - the memory traffic: eager softmax reads and writes the matrix several times, the fused
    kernel reads it once and writes it once.

Run:
  python solutions/softmax_triton.py                      # on a CUDA machine
  TRITON_INTERPRET=1 python solutions/softmax_triton.py   # on a CPU, with CPU tensors (slow)
"""
# END SOLUTION
# BEGIN STUB
# """Exercise softmax_triton: row softmax as one fused Triton kernel.
#
# Lesson: FlashAttention and kernels, sections "Softmax, the safe way", "Writing a kernel: Triton"
# and "Build It" (softmax_triton.py). "Break It" 1 is about this kernel.
#
# Your job: fill in the body of `softmax_kernel` (the numbered TODOs), then delete the
# `raise NotImplementedError` line at the top of `softmax`. One program handles one row: load the
# whole row into one tile, subtract its max, exponentiate, sum, divide, store. `softmax_eager` is
# given: it is the unfused version you are racing.
#
# Run:
#   TRITON_INTERPRET=1 python exercises/softmax_triton.py   # on a CPU, with CPU tensors (slow)
#   python exercises/softmax_triton.py                      # on a CUDA machine
#   make check EX=softmax_triton                            # the grader's checks
# """
# END STUB

import os
import sys

import torch
import triton
import triton.language as tl


# --------------------------------------------------------------------------------------------
# Reference (given): plain PyTorch, one kernel per line, every intermediate goes through HBM.
# --------------------------------------------------------------------------------------------


def softmax_eager(x):
    """The unfused version: several separate kernels, several HBM round trips."""
    # read  MN elements ; write M  elements
    m = x.max(dim=1, keepdim=True).values
    # read  MN + M elements ; write MN elements
    e = torch.exp(x - m)
    # read  MN elements (sum) + MN elements (divide) ; write M + MN elements
    return e / e.sum(dim=1, keepdim=True)
# BEGIN SOLUTION


# --------------------------------------------------------------------------------------------
# Kernel: one program per row. The whole row fits in one tile of BLOCK >= n_cols lanes.
# Memory traffic: read MN elements, write MN elements, the minimum possible.
# --------------------------------------------------------------------------------------------
# END SOLUTION


@triton.jit
def softmax_kernel(out_ptr, in_ptr, row_stride, n_cols, BLOCK: tl.constexpr,
                   out_row_stride=None):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # The lesson's call passes one stride for both tensors; the wrapper below passes the
    # output's own, because a row-strided input (a column slice) gets a contiguous output.
    if out_row_stride is None:
        out_row_stride = row_stride
    # BEGIN SOLUTION

    # 1. Load the row. Lanes past n_cols get -inf: they must not win the max (0 would, for an
    #    all-negative row) and exp(-inf - max) = 0 adds nothing to the sum.
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=float("-inf"))
    x = x.to(tl.float32)  # fp16/bf16 in memory, fp32 for the arithmetic

    # 2. Safe softmax: after subtracting the max every exponent is <= 0, so nothing overflows.
    #    (Break It 1: without "- x_max", exp overflows float32 once an input passes 88.7, and
    #    inf / inf = nan; fp16 rows scaled by 40 or more do it every time.)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    den = tl.sum(num, axis=0)
    y = num / den

    # 3. Store with the same mask, converting back to the output's dtype.
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    # END SOLUTION
    # BEGIN STUB
    # # 1. load this row: in_ptr + row * row_stride + cols, masked, other=-inf
    # #    (why -inf and not 0? think about the max and the exp)            (roughly 2 lines)
    # # 2. subtract the max, exponentiate, sum, divide (in float32)          (roughly 4 lines)
    # # 3. store to out_ptr + row * out_row_stride + cols with the same mask,
    # #    converted to out_ptr.dtype.element_ty                             (roughly 1 line)
    # ...
    # END STUB
# BEGIN SOLUTION


# --------------------------------------------------------------------------------------------
# Host wrapper.
# --------------------------------------------------------------------------------------------
# END SOLUTION


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, one Triton program per row.

    Args:
        x: (n_rows, n_cols) float16, bfloat16 or float32 on CUDA (or a CPU tensor under
           TRITON_INTERPRET=1). Rows may be strided (x[:, :500] of a wider tensor).

    Returns:
        (n_rows, n_cols), same dtype, a fresh contiguous tensor.
    """
    # BEGIN STUB
    # raise NotImplementedError("TODO(softmax_triton): softmax_kernel - load, subtract the max, "
    #                           "exp, sum, divide, store; then delete this line")
    # END STUB
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:  # the kernel reads each row as consecutive elements
        x = x.contiguous()
    # empty_like(x) would copy x's layout only when x is dense, so allocate the layout we want.
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(n_cols)  # the whole row in one tile
    softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=BLOCK,
                              out_row_stride=out.stride(0))
    return out


# --------------------------------------------------------------------------------------------
# Self-check on awkward sizes against a float64 reference (the grader checks more).
# --------------------------------------------------------------------------------------------

# Max abs error allowed on probabilities (all in [0, 1]): the kernel computes in fp32, so the
# error is the rounding of the output dtype (fp16: 2^-11 relative, bf16: 2^-8).
TOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _check(name, x):
    ref = torch.softmax(x.double(), dim=1)
    got = softmax(x)
    assert got.shape == x.shape and got.dtype == x.dtype, (
        f"{name}: expected shape {tuple(x.shape)} {x.dtype}, got {tuple(got.shape)} {got.dtype}")
    assert got.is_contiguous(), f"{name}: expected a contiguous output"
    assert not got.isnan().any(), f"{name}: output has NaN (inf / inf: is the max subtracted?)"
    err = (got.double() - ref).abs()
    assert err.max() <= TOL[x.dtype], (
        f"{name}: max abs error {err.max():.2e} at (row, col) "
        f"{divmod(int(err.argmax()), x.shape[1])}, allowed {TOL[x.dtype]:.0e}. If only the "
        f"all-negative rows are off, are the masked lanes loaded as -inf?")
    print(f"  ok  {name:44s} max abs err {err.max():.1e}")


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit(f"No GPU found: run on the CPU with TRITON_INTERPRET=1 python {sys.argv[0]}")
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n_rows, n_cols in [(5, 781), (3, 1), (4, 1024), (7, 130)]:
            x = torch.randn(n_rows, n_cols, device=device, dtype=dtype)
            _check(f"({n_rows}, {n_cols}) {dtype}", x)
        x = torch.randn(4, 781, device=device, dtype=dtype)
        _check(f"all-negative rows {dtype}", x - 50)
        _check(f"rows scaled by 20 {dtype}", x * 20)
        _check(f"rows scaled by 100 {dtype}", x * 100)  # exp overflows without the max
        wide = torch.randn(6, 781, device=device, dtype=dtype)
        _check(f"row-strided slice [:, :500] {dtype}", wide[:, :500])
        _check(f"transposed wide.t()[:5], (5, 6) {dtype}", wide.t()[:5])
    print("softmax_triton: all checks passed")
