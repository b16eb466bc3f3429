"""What this machine can run: which packages import, whether there is a CUDA GPU.

Layers and exercises that cannot run here are reported as not run, with the reason and the
command that would run them, never counted as zero.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from functools import lru_cache

from grader.registry import LAYERS

INSTALL = "run `make setup` (or `pip install -r requirements.txt`)"
WHY_MISSING = {
    "numpy": f"NumPy is not installed: {INSTALL}",
    "torch": f"PyTorch is not installed: {INSTALL}",
    "triton": ("Triton is not installed here (it has no macOS wheels): the Triton kernels grade "
               "under `make grade` on Linux, or `make grade-gpu` on a GPU machine"),
    "cuda": "no CUDA GPU here: run `make grade-gpu` on a machine with an NVIDIA GPU",
}


@dataclass
class Environment:
    have: set = field(default_factory=set)       # subset of {numpy, torch, triton, cuda}
    device: str = "cpu"                          # a one-line description for reports
    cuda_probed: bool = False                    # whether this machine was asked about a GPU
    gpu_bytes: int = 0                           # the GPU's memory, where there is one
    gpu_unified: bool = False                    # its memory is the host's (a GB10, a Jetson)

    def missing(self, needs) -> list[str]:
        return [n for n in ("numpy", "torch", "triton", "cuda") if n in needs and n not in self.have]

    def why_not(self, needs) -> str | None:
        gone = self.missing(needs)
        return WHY_MISSING[gone[0]] if gone else None

    def layer_reason(self, layer: str) -> str | None:
        return self.why_not(LAYERS[layer].needs)


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _cuda_driver() -> bool:
    """Whether the CUDA driver library loads here: without it torch sees no GPU, so a machine
    without one is answered in milliseconds instead of the seconds `import torch` takes."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@lru_cache(maxsize=1)
def detect(want_cuda: bool = True) -> Environment:
    env = Environment()
    for name in ("numpy", "torch", "triton"):
        if _importable(name):
            env.have.add(name)
    # (the option no_cuda: grader.run asks for none)
    env.cuda_probed = want_cuda and "torch" in env.have
    if env.cuda_probed and _cuda_driver():
        import torch

        if torch.cuda.is_available():
            env.have.add("cuda")
            p = torch.cuda.get_device_properties(0)
            env.gpu_bytes = int(p.total_memory)
            env.gpu_unified = bool(getattr(p, "is_integrated", 0))
            env.device = (f"{p.name} (sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, "
                          f"{p.total_memory / 2**30:.0f} GiB)")
    if "cuda" not in env.have:
        import platform

        env.device = f"CPU only ({platform.machine()}, {os.cpu_count()} cores)"
    return env
