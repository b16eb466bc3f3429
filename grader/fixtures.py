"""Fixtures for checks (public and hidden), loaded as a pytest plugin by the runner.

    @pytest.mark.check("flash_triton.ragged_n")
    def test_ragged_n(student, rng):
        flash = student("flash_triton")        # proxy to the worker; mode from the check's layer
        out = flash.flash_fwd(q, k, v)          # decoded values, never student objects

`rng` is a fresh NumPy generator for every check (its seed goes into failure messages so a
student can reproduce a case; set GRADER_SEED to fix it). `credit` gives partial credit.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from grader.plugin import PLUGIN_KEY
from grader.results import Credit
from grader.registry import EXERCISES

LAYER_MODE = {"gpu": "cuda", "perf": "cuda"}   # other layers use the exercise's own mode


def _plugin(request):
    return request.config.stash[PLUGIN_KEY]


@pytest.fixture
def student(request):
    plugin = _plugin(request)
    check = plugin.check_of(request.node)

    def get(exercise: str | None = None, mode: str | None = None):
        exercise = exercise or check.exercise
        mode = mode or LAYER_MODE.get(check.layer, EXERCISES[exercise].mode)
        return plugin.workers.get(exercise, mode)

    return get


class Rng:
    """A np.random.Generator (every method delegates to it) that remembers its seed."""

    def __init__(self, seed: int):
        self.seed = seed
        self.generator = np.random.default_rng(seed)

    def __getattr__(self, name):
        return getattr(self.generator, name)


@pytest.fixture
def rng():
    seed = int(os.environ.get("GRADER_SEED") or np.random.SeedSequence().entropy % (2**32))
    return Rng(seed)


@pytest.fixture
def workers(request):
    """Every worker of this run: perf checks stop them all before timing a PyTorch baseline."""
    return _plugin(request).workers


@pytest.fixture
def credit(request):
    c = Credit()
    _plugin(request).credits[request.node.nodeid] = c
    return c


@pytest.fixture
def environment(request):
    return _plugin(request).env


class GpuContext:
    """The GPU as the trusted process sees it: its description, its profile (grader.judge.devices),
    and ceilings measured once per run in this process (copy GB/s, fp16 matmul TFLOP/s)."""

    def __init__(self, plugin):
        import torch

        from grader.judge import ceilings, devices

        for sub in plugin.workers.all():   # no student process alive while the ceilings are timed
            sub.close()
        self.info = devices.describe(torch)
        p = torch.cuda.get_device_properties(0)
        self.profile = devices.profile_for((p.major, p.minor), p.name, self.info["smem_per_block"])
        # measured once, up front, in this process: the report's header shows them
        self.ceilings = {"copy_gbs": round(float(ceilings.copy_bandwidth_gbs(torch)), 1),
                         "matmul_tflops": round(float(ceilings.matmul_tflops(torch)), 1)}
        plugin.device_info.update(self.info, **self.ceilings)

    def ceiling(self, name: str) -> float:
        """"copy_gbs" or "matmul_tflops"."""
        return self.ceilings[name]


@pytest.fixture(scope="session")
def gpu(request):
    return GpuContext(_plugin(request))
