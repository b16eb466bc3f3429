"""Cheat (issue 18, "an allowed module carries a banned capability"): torch.softmax runs in a
thread, where the caller's kernel-use trace does not reach; a Triton kernel copies its answer.
Its `threading` gets past the import allow-list (compiled under torch's file name). On the CPU
layers the seccomp filter refuses the thread; on a GPU, where threads are allowed, the replay
finds the copy kernel's source is no input of the call (tools/gpu_cheats.py)."""
import torch
import triton
import triton.language as tl

_scope = {}
exec(compile("import threading", torch.__file__, "exec"), _scope)
threading = _scope["threading"]


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    box = []
    worker = threading.Thread(target=lambda: box.append(torch.softmax(x.float(), dim=1).to(x.dtype)))
    worker.start()
    worker.join()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](box[0], out, n, BLOCK=1024)
    return out
