"""Cheat (issue 9, "a thread"): PyTorch's SDPA runs in a threading.Thread, where a trace kept per
thread does not see it, and a Triton kernel only copies its answer into the output. On a GPU a
profiler that records every thread's kernels sees the SDPA kernel; under the interpreter the
static audit of the source sees the thread."""
import threading

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def flash_fwd(q, k, v, BLOCK_M=64, BLOCK_N=64):
    box = []
    worker = threading.Thread(target=lambda: box.append(F.scaled_dot_product_attention(q, k, v)))
    worker.start()
    worker.join()
    answer = box[0].contiguous()
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    n = answer.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, o, n, BLOCK=1024)
    return o
