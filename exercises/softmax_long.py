"""Exercise softmax_long: row softmax for rows of any length, in Triton.

Lesson: FlashAttention and kernels, sections "Softmax, the safe way", "Online softmax: keep a
running max and a running sum" and "Writing a kernel: Triton". softmax_triton.py holds a whole
row in one tile; a row of 256K floats (1 MB) does not fit in one program.

Your job: write `softmax(x, BLOCK=None)` for a 2-D float16, bfloat16 or float32 tensor with 1 to
256K columns, along the last dimension, same dtype out, arithmetic in float32. A row of at most
BLOCK columns is one tile (put several such rows in one program); a longer row is read in
column blocks of BLOCK with the online softmax (running max m and sum l, l rescaled by
exp(m_old - m_new) when the max moves), then read again to write exp(x - m) / l. Splitting a
row across programs and merging their (m, l) with the merge rule is fine too. The skeleton
below has two kernels; change it as you like, as long as `softmax` computes with Triton.

Run:
  TRITON_INTERPRET=1 python exercises/softmax_long.py   # on a CPU, with CPU tensors (slow)
  python exercises/softmax_long.py                      # on a CUDA machine
  make check EX=softmax_long                            # the grader's checks
"""

import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(out_ptr, in_ptr, n_rows, n_cols, in_row_stride, out_row_stride,
                        BLOCK: tl.constexpr, ROWS: tl.constexpr):
    # rows = program_id(0) * ROWS + arange(ROWS); load the (ROWS, BLOCK) tile masked on
    # rows < n_rows and cols < n_cols (other=-inf), max, exp, sum, divide in float32, store
    # (roughly 10 lines)
    ...


@triton.jit
def softmax_online_kernel(out_ptr, in_ptr, n_cols, in_row_stride, out_row_stride,
                          BLOCK: tl.constexpr):
    # 1. m = -inf, l = 0; for each block of BLOCK columns (masked, other=-inf):
    #    m_new = max(m, max(x)); l = l * exp(m - m_new) + sum(exp(x - m_new)); m = m_new.
    #    Careful: a block of only -inf gives m_new = -inf, and -inf - (-inf) is nan.
    #                                                                     (roughly 10 lines)
    # 2. for each block again: store exp(x - m) / l                      (roughly 5 lines)
    ...


def softmax(x: torch.Tensor, BLOCK: int | None = None, num_warps: int | None = None) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, for rows of any length.

    Args:
        x: (n_rows, n_cols) float16, bfloat16 or float32 on CUDA (or a CPU tensor under
           TRITON_INTERPRET=1), 1 <= n_cols <= 262144. Rows may be strided.
        BLOCK: the most columns of a row one program holds at once (a power of two). A row of
           n_cols <= BLOCK is one tile; a longer row is processed in blocks of BLOCK columns.
           None: chosen from n_cols. The grader passes small values to test long rows cheaply.
        num_warps: warps per program; None: chosen from the tile.

    Returns:
        (n_rows, n_cols), same dtype, a fresh contiguous tensor.
    """
    raise NotImplementedError("TODO(softmax_long): softmax_rows_kernel and "
                              "softmax_online_kernel, then the launch; then delete this line")
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:  # the kernels read each row as consecutive elements
        x = x.contiguous()
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    # n_cols <= BLOCK: softmax_rows_kernel, several rows per program;
    # else: softmax_online_kernel, one program per row                   (roughly 10 lines)
    return out


# --------------------------------------------------------------------------------------------
# Self-check on awkward sizes against a float64 reference.
# --------------------------------------------------------------------------------------------

# Max abs error allowed on probabilities (all in [0, 1]): the kernels compute in fp32, so the
# error is the rounding of the output dtype (fp16: 2^-11 relative, bf16: 2^-8).
TOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def _check(name, x, **kw):
    ref = torch.softmax(x.double(), dim=-1)
    got = softmax(x, **kw)
    assert got.shape == x.shape and got.dtype == x.dtype, (
        f"{name}: expected shape {tuple(x.shape)} {x.dtype}, got {tuple(got.shape)} {got.dtype}")
    assert not got.isnan().any(), f"{name}: output has NaN (inf / inf, or -inf - (-inf)?)"
    err = (got.double() - ref).abs()
    assert err.max() <= TOL[x.dtype], (
        f"{name}: max abs error {err.max():.2e} at (row, col) "
        f"{divmod(int(err.argmax()), x.shape[1])}, allowed {TOL[x.dtype]:.0e}. If the error "
        f"starts where the row max moves into a later block, is l rescaled by exp(m - m_new)?")
    print(f"  ok  {name:48s} max abs err {err.max():.1e}")


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        sys.exit("No GPU found: run on the CPU with TRITON_INTERPRET=1 "
                 "python exercises/softmax_long.py")
    torch.manual_seed(0)
    # on the CPU a small BLOCK stands in for a long row; on a GPU the widths are real
    block, widths = (32, (1, 2, 33, 100, 300)) if device == "cpu" else (None, (1, 781, 16385, 262144))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n_cols in widths:
            x = torch.randn(5, n_cols, device=device, dtype=dtype)
            _check(f"(5, {n_cols}) {dtype}", x, BLOCK=block)
            x[:, -1] = 12  # the max in the last block: l must be rescaled
            _check(f"(5, {n_cols}) {dtype}, max in the last column", x, BLOCK=block)
            _check(f"(5, {n_cols}) {dtype} * 100 (exp overflows without the max)", x * 100,
                   BLOCK=block)
            _check(f"(5, {n_cols}) {dtype} - 300 (all far below 0)", x - 300, BLOCK=block)
        x = torch.randn(3, 100, device=device, dtype=dtype)
        x[:, :64] = float("-inf")  # whole blocks of -inf: exp(-inf - (-inf)) must not appear
        _check(f"(3, 100) {dtype}, the first 64 columns -inf", x, BLOCK=32)
        wide = torch.randn(6, 781, device=device, dtype=dtype)
        _check(f"row-strided slice [:, :500] {dtype}", wide[:, :500], BLOCK=block)
    print("softmax_long: all checks passed")
