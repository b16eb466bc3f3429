"""The trusted side's GPU context (grader.fixtures.GpuContext): the ceilings are measured only
where the perf layer runs, whose checks alone read them (a grading process of the untimed gpu
checks would time them for nothing, beside other processes' kernels). A made-up device: no
GPU is needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from grader import fixtures
from grader.judge.machine import ceilings, devices
from grader.results import Selection
from tests.helpers import set_options


@pytest.fixture
def fake_gpu(monkeypatch):
    timed = []
    monkeypatch.setattr(devices, "describe", lambda t, device=0: {"name": "Fake", "smem_per_block": 99 * 1024})
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(major=9, minor=0, name="Fake"))
    monkeypatch.setattr(ceilings, "copy_bandwidth_gbs", lambda t: timed.append("copy") or 1000.0)
    monkeypatch.setattr(ceilings, "matmul_tflops", lambda t: timed.append("matmul") or 100.0)
    set_options(monkeypatch, measurements=None)
    return timed


def _plugin(layers):
    return SimpleNamespace(workers=SimpleNamespace(all=lambda: []), device_info={},
                           selection=Selection(["flash_triton"], layers))


def test_ceilings_are_measured_where_the_perf_layer_runs(fake_gpu):
    plugin = _plugin(["gpu", "perf"])
    gpu = fixtures.GpuContext(plugin)
    assert fake_gpu == ["copy", "matmul"]
    assert gpu.ceiling("copy_gbs") == 1000.0 and plugin.device_info["matmul_tflops"] == 100.0


def test_a_run_without_the_perf_layer_times_no_ceiling(fake_gpu):
    plugin = _plugin(["gpu"])
    gpu = fixtures.GpuContext(plugin)
    assert fake_gpu == [] and "copy_gbs" not in plugin.device_info
    with pytest.raises(RuntimeError, match="grader defect"):
        gpu.ceiling("copy_gbs")
