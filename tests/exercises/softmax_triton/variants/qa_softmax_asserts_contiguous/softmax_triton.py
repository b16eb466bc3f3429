"""Near-correct: qa_softmax_tutorial in a library's defensive style, which refuses input that is
not contiguous (assert x.is_contiguous()) instead of handling row strides. One known flaw: it
must lose only the strided-input check, and the failure must name the case that raised.

Triton's tutorial 02-fused-softmax. A persistent grid of at most
a few programs per SM, each looping over rows with tl.range(..., num_stages=...); separate row
strides for input and output; the whole row in one block of BLOCK_SIZE lanes."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    # starting row of the program
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        # The stride represents how much we need to increase the pointer to advance 1 row
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        # Load the row into SRAM, using a mask since BLOCK_SIZE may be > than n_cols
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf')).to(tl.float32)
        # Subtract maximum for numerical stability
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        # Write back output to DRAM
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output.to(output_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    assert x.is_contiguous(), "softmax: x must be contiguous"
    n_rows, n_cols = x.shape
    # The block size of each loop iteration is the smallest power of two greater than the
    # number of columns in `x`
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    num_stages = 2
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if x.is_cuda:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        num_programs = min(sms * 4, n_rows)
    else:
        num_programs = min(4, n_rows)
    softmax_kernel[(num_programs, 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                          BLOCK_SIZE=BLOCK_SIZE, num_stages=num_stages)
    return y
