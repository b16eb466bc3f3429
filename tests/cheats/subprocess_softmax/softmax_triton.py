"""Cheat (issue 9, "another process"): torch.softmax runs in a helper process, where the worker's
trace cannot see it, and a Triton kernel only copies the answer into the output. On the CPU the
rows go through the helper's stdin and stdout; on a GPU the helper computes on the same GPU
(CUDA tensors shared through torch.multiprocessing). The static audit sees the subprocess; on a
GPU, NVML's process list sees a second process using the device."""
import subprocess
import sys

import numpy as np
import torch
import triton
import triton.language as tl

HELPER = r"""
import sys, numpy as np, torch
shape = tuple(int(s) for s in sys.argv[1:3])
x = torch.from_numpy(np.frombuffer(sys.stdin.buffer.read(), dtype=np.float32).reshape(shape).copy())
sys.stdout.buffer.write(torch.softmax(x, dim=1).numpy().tobytes())
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


def _softmax_elsewhere(x):
    global _conn
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
    rows = np.ascontiguousarray(x.numpy(), dtype=np.float32)
    done = subprocess.run([sys.executable, "-c", HELPER, *map(str, rows.shape)],
                          input=rows.tobytes(), capture_output=True, check=True)
    values = np.frombuffer(done.stdout, dtype=np.float32).reshape(rows.shape)
    return torch.from_numpy(values.astype(x.numpy().dtype))


def softmax(x):
    answer = _softmax_elsewhere(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = answer.numel()
    _copy[(triton.cdiv(n, 1024),)](answer, out, n, BLOCK=1024)
    return out
