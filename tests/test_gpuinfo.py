"""make gpuinfo (tools/gpuinfo.py): the memory ladder. Without a GPU it says so in one line and
draws the lesson's A100 and GB10 figures; the GPU path's drawing runs here on a fake device
(sizes as an H200 reports them, the two ceilings stubbed) and for real where there is a GPU."""

from __future__ import annotations

import json
import types

import pytest
import torch

from tools import gpuinfo


def test_no_gpu_says_so_and_draws_the_lessons_figures(tmp_path, monkeypatch, capsys):
    assert gpuinfo.main(["--out", str(tmp_path), "--no-cuda"]) == 0
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if "no CUDA GPU" in line]
    assert len(said) == 1 and out.startswith("gpuinfo: no CUDA GPU"), said
    # the lesson's numbers: 108 x 128 B x 1.41 GHz, 1.5 TB/s, 273 GB/s, ridge ~460, d / 2
    for text in ("19.5 TB/s = 108 SMs x 128 B x 1.41 GHz", "1,500 GB/s", "273 GB/s",
                 "458 FLOPs/byte", "around 460", "64 FLOPs/byte", "memory-bound"):
        assert text in out, text
    ladder = [line for line in out.splitlines() if "<== naive attention waits here" in line]
    assert len(ladder) == 2, ladder          # once per chip
    rows = json.loads((tmp_path / "ladder.json").read_text())
    assert [r["waits"] for r in rows] == ["HBM (main memory)"] * 2
    assert [r["rung"] for r in rows[0]["rungs"]] == ["registers", "shared memory (SRAM)",
                                                     "L2 (whole chip)", "HBM (main memory)"]
    assert "```" in (tmp_path / "ladder.md").read_text()


def fake_h200():
    props = types.SimpleNamespace(
        name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
        total_memory=150_000_000_000, shared_memory_per_block_optin=232448,
        shared_memory_per_multiprocessor=233472, L2_cache_size=60 << 20, is_integrated=0,
        regs_per_multiprocessor=65536, clock_rate=1_980_000)
    cuda = types.SimpleNamespace(is_available=lambda: True,
                                 get_device_properties=lambda device=0: props)
    return types.SimpleNamespace(cuda=cuda, __version__=torch.__version__,
                                 version=types.SimpleNamespace(cuda="12.8"))


def test_gpu_ladder_from_the_device(monkeypatch):
    from grader.judge.machine import ceilings

    monkeypatch.setattr(ceilings, "copy_bandwidth_gbs",
                        lambda t, nbytes=None, device="cuda": 9000.0 if nbytes else 4300.0)
    monkeypatch.setattr(ceilings, "matmul_tflops", lambda t, dtype=None, n=8192: 660.0)
    chip = gpuinfo.measure(fake_h200())
    assert chip["sms"] == 132 and chip["clock_hz"] == 1.98e9 and chip["regs_per_sm"] == 256 * 1024
    text = "\n".join(gpuinfo.draw(chip))
    assert "33.5 TB/s = 132 SMs x 128 B x 1.98 GHz (derived)" in text       # SMs x 128 B x clock
    assert "228 KB per SM, 227 KB per block" in text and "60 MB" in text and "150 GB" in text
    assert ">= 9.0 TB/s (copy within L2, measured)" in text
    assert "4,300 GB/s (copy of 1 GiB buffers, measured); spec 4,800 GB/s" in text
    assert "ridge point: 153 FLOPs/byte = 660 TFLOP/s (fp16 matmul, measured)" in text
    hbm = text.splitlines()[text.splitlines().index(next(
        line for line in text.splitlines() if line.strip().startswith("HBM"))) + 1]
    assert hbm.endswith("<== naive attention waits here")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_ladder_on_this_gpu(capsys):
    assert gpuinfo.main([]) == 0
    out = capsys.readouterr().out
    assert "(measured here)" in out and "ridge point" in out and "(derived)" in out
