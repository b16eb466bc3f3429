"""Cheat (issue 9, "another process"): torch.softmax runs in a helper process, where the worker's
trace cannot see it, and a Triton kernel only copies the answer into the output. On the CPU the
rows go through the helper's stdin and stdout; on a GPU the helper computes on the same GPU
(CUDA tensors shared through torch.multiprocessing). The static audit sees the subprocess; on a
GPU, NVML's process list sees a second process using the device. The helper is started once and
kept (importing torch per call would be slow)."""
import subprocess
import sys

import numpy as np
import torch
import triton
import triton.language as tl

HELPER = r"""
import sys, numpy as np, torch
read, write = sys.stdin.buffer.read, sys.stdout.buffer
while True:
    head = read(8)
    if len(head) < 8:
        break
    rows, cols = np.frombuffer(head, dtype=np.int32)
    x = np.frombuffer(read(4 * int(rows) * int(cols)), dtype=np.float32).reshape(rows, cols)
    write.write(torch.softmax(torch.from_numpy(x.copy()), dim=1).numpy().tobytes())
    write.flush()
"""


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def _cuda_helper(conn):
    while True:
        x, out = conn.recv()
        out.copy_(torch.softmax(x.float(), dim=1).to(out.dtype))
        torch.cuda.synchronize()
        conn.send(True)


_conn = None
_helper = None


def _softmax_elsewhere(x):
    global _conn, _helper
    if x.is_cuda:
        if _conn is None:
            import torch.multiprocessing as mp
            ctx = mp.get_context("spawn")
            _conn, child = ctx.Pipe()
            ctx.Process(target=_cuda_helper, args=(child,), daemon=True).start()
        answer = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        _conn.send((x.contiguous(), answer))
        _conn.recv()
        return answer
    if _helper is None:
        _helper = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)
    rows = np.ascontiguousarray(x.numpy(), dtype=np.float32)
    _helper.stdin.write(np.array(rows.shape, dtype=np.int32).tobytes() + rows.tobytes())
    _helper.stdin.flush()
    values = np.frombuffer(_helper.stdout.read(rows.nbytes), dtype=np.float32).reshape(rows.shape)
    return torch.from_numpy(values.astype(x.numpy().dtype))


def softmax(x):
    answer = _softmax_elsewhere(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = answer.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK=1024)
    return out
