import torch, triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)                       # which program am I? 0, 1, 2, ...
    offs = pid * BLOCK + tl.arange(0, BLOCK)     # the BLOCK element indices I own
    mask = offs < n                              # the last program may run past the end
    x = tl.load(x_ptr + offs, mask=mask)         # gather a whole tile from HBM
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)   # write the tile back

def add(x, y):
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)       # how many programs to launch
    add_kernel[grid](x, y, out, x.numel(), BLOCK=1024)
    return out

