"""Trusted-side measurements: what this machine can do, timed by the grader, never by students.

Run these in the trusted process (python -m grader, python -m tools.bench), never in a worker
that imported student code: a submission could patch torch there.

    copy_bandwidth_gbs   a big device-to-device copy:  GB/s = 2 * bytes / time (read + write)
    matmul_tflops        an n x n x n matmul:          TFLOP/s = 2 * n^3 / time
                         (both timed by grader.judge.perf.events.time_cuda)
    fits / memory_budget whether an allocation fits comfortably in free memory (estimate
                         before allocating: on unified memory an oversized allocation can stall
                         the whole machine, not just raise)
    naive_attention_bytes  the bytes eager attention holds at its peak (S and P are N x N)

Every function takes the torch module as an argument (nothing is imported at module load) and
a `device`, so the logic runs on CPU tensors too ("cpu": host clock, no L2 flush), which is how
the repo's tests exercise it without a GPU.
"""

from __future__ import annotations

import os

from grader.judge.machine import devices
from grader.judge.perf.events import time_cuda   # noqa: F401 - the bench (tools/bench/) times with ceilings.time_cuda

MiB = 1 << 20
GiB = 1 << 30
ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def _torch(torch):
    if torch is None:
        import torch as _t

        return _t
    return torch


def elem_bytes(dtype) -> int:
    """Bytes per element of a torch dtype, a dtype name ("float16") or an int."""
    if isinstance(dtype, int):
        return dtype
    if isinstance(dtype, str):
        return ELEM_BYTES[dtype.removeprefix("torch.")]
    return int(getattr(dtype, "itemsize"))


# --------------------------------------------------------------------------------- ceilings


def copy_bandwidth_gbs(torch=None, nbytes: int | None = None, device="cuda") -> float:
    """Device-to-device copy bandwidth, GB/s = 2 * nbytes / time (it reads and writes nbytes).

    The buffers (1 GiB each by default, less if memory is tight) are far bigger than any L2, so
    no flush is needed. This is the ceiling a fused softmax is judged against.
    """
    torch = _torch(torch)
    if nbytes is None:
        nbytes = GiB
        while nbytes > 64 * MiB and not fits(2 * nbytes, torch, device=device):
            nbytes //= 2
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    ms = time_cuda(lambda: dst.copy_(src), warmup=5, rep=20, flush_l2=False, torch=torch,
                   device=device)
    return 2 * src.numel() * 4 / ms / 1e6


def matmul_tflops(torch=None, dtype=None, n: int = 8192, device="cuda") -> float:
    """Dense matmul throughput, TFLOP/s = 2 * n^3 / time, on random data (zeros draw less power
    and can clock higher). n halves until a, b and c fit. The ceiling for attention's TFLOP/s.
    """
    torch = _torch(torch)
    dtype = dtype or torch.float16
    e = elem_bytes(dtype)
    while n > 512 and not fits(3 * n * n * e, torch, device=device):
        n //= 2
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = torch.empty(n, n, device=device, dtype=dtype)
    ms = time_cuda(lambda: torch.matmul(a, b, out=c), warmup=5, rep=20, flush_l2=False,
                   torch=torch, device=device)
    return 2 * n ** 3 / ms / 1e9


# ----------------------------------------------------------------------------------- memory


def host_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (it counts the reclaimable page cache), else sysconf."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(torch=None, profile=None, device="cuda") -> int:
    """Bytes one allocation may take: profile.memory_fraction of free memory, minus a reserve.

    On a unified-memory device (the GB10 profile, or any GPU that says it is integrated) the
    free figure is the smaller of what CUDA reports and what the host has available, and at most
    half of it is used: there, an oversized allocation can stall the whole machine instead of
    raising OutOfMemoryError. On "cpu": half of the host's available memory, minus 1 GiB.
    """
    torch = _torch(torch)
    if str(device) == "cpu":
        return max(0, int((host_available_bytes() or 0) * 0.5) - GiB)
    props = torch.cuda.get_device_properties(device)
    profile = profile or devices.profile_for(
        (props.major, props.minor), props.name,
        getattr(props, "shared_memory_per_block_optin", None))
    free, _total = torch.cuda.mem_get_info(device)
    fraction = profile.memory_fraction
    if profile.unified_memory or getattr(props, "is_integrated", 0):
        host = host_available_bytes()
        if host is not None:
            free = min(free, host)
        fraction = min(fraction, 0.5)
    return max(0, int(free * fraction) - profile.memory_reserve_bytes)


def fits(nbytes: int, torch=None, profile=None, device="cuda") -> bool:
    """Whether allocating nbytes fits comfortably (see memory_budget). Ask before allocating."""
    return nbytes <= memory_budget(torch, profile, device)


def attention_io_bytes(B: int, H: int, N: int, D: int, dtype) -> int:
    """q, k, v and two outputs (the reference and the one under test): 5 * B*H*N*D elements."""
    return 5 * B * H * N * D * elem_bytes(dtype)


def naive_attention_bytes(B: int, H: int, N: int, D: int, dtype) -> int:
    """Peak bytes of eager attention on (B, H, N, D) inputs, the inputs included.

        S = (q @ k^T) * scale     B*H*N^2 elements (the unscaled product is freed as S is made)
        P = softmax(S)            B*H*N^2 elements (S is still alive: 2 * B*H*N^2 at the peak)
        + attention_io_bytes      q, k, v, and two (B, H, N, D) outputs

    At B=1, H=32, D=128 fp16: S and P are 8.6 GB at N = 8K, 34.4 GB at 16K, 137 GB at 32K (the
    lesson's numbers). PyTorch's CUDA softmax on fp16 accumulates in fp32 registers, not in an
    fp32 copy of S; float32 inputs double everything through elem_bytes.
    """
    e = elem_bytes(dtype)
    return 2 * B * H * N * N * e + attention_io_bytes(B, H, N, D, dtype)
