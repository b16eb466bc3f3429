"""The grading target (`make grade-gpu TARGET=gb10`), without a GPU: the worker's probe compiles
the reference forward kernel for the Spark (sm_121) and reads its shared memory from the compiled
metadata; the profile lookup; --target and GRADER_TARGET; the report's header and flags.

Triton compiles for any NVIDIA arch without a device: a stand-in driver answers the current
device, stream and target (Triton's own launch is never reached: warmup=True compiles only).
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest

from grader.judge.machine import devices, target
from grader.judge.perf import verdicts
from grader.registry import ROOT

SPARK_LIMIT = 101376


# ------------------------------------------------------------------------ compiled, on CPU


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compiler():
    """Triton with a stand-in driver that says "an H200 (sm_90)": what the grader's worker sees
    on the instructors' GPU, minus the GPU."""
    triton = pytest.importorskip("triton")
    pytest.importorskip("torch")
    from tools.target_demo import stand_in_driver

    with stand_in_driver():
        yield triton


def _launch_args(head_dim=128, n=256):
    import torch

    q = torch.randn(1 * 2, n, head_dim, dtype=torch.float16)
    o = torch.empty_like(q)
    return (q, q, q, o, n, q.stride(0), q.stride(1), 0.1)


def _traced(kernel, blocks: dict, num_warps: int, num_stages: int, spec: dict | None) -> dict:
    """One launch through the worker's probe (trace with a target): the kernel is compiled for
    this 'device' (warmup: no launch) and, by the probe, for the target."""
    from grader.worker import probes
    from triton.runtime.jit import JITFunction

    extras: dict = {}
    with probes.trace(extras, spec):
        JITFunction.run(kernel, *_launch_args(), grid=(1,), warmup=True, **blocks, D=128,
                        num_warps=num_warps, num_stages=num_stages)
    return extras


SOLUTIONS = [("flash_triton", "solutions/flash_triton.py"),
             ("flash_backward", "solutions/flash_backward.py")]


@pytest.mark.parametrize("name,path", SOLUTIONS[:1])
def test_hopper_tiles_are_over_the_spark_limit_and_the_spark_tiles_fit(compiler, name, path):
    fwd = _module(ROOT / path, f"target_{name}")._flash_fwd
    spec = target.spec(devices.GB10)
    cases = {(128, 128, 8, 3): False, (64, 64, 4, 2): True, (64, 64, 4, 3): True}
    for (bm, bn, warps, stages), fits in cases.items():
        extras = _traced(fwd, {"BLOCK_M": bm, "BLOCK_N": bn}, warps, stages, spec)
        assert extras["launches"] == 1 and extras["triton_kernels"] == ["_flash_fwd"]
        (rec,) = extras["compiled"]
        assert rec["name"] == "_flash_fwd"
        assert rec["constexprs"] == {"BLOCK_M": bm, "BLOCK_N": bn, "D": 128}
        assert (rec["num_warps"], rec["num_stages"], rec["arch"]) == (warps, stages, 90)
        shared = rec["target"]["shared"]
        assert rec["target"]["arch"] in (121, 120, 80), rec["target"]
        assert (shared <= SPARK_LIMIT) is fits, (bm, bn, stages, shared)
        assert rec["shared"] > shared   # sm_90 keeps more K/V stages in flight (docs/SPARK.md)
        evidence = target.Evidence(devices.GB10)
        evidence.add(name, f"{name}.gpu_real_sizes", extras)
        over, _ = evidence.over_limit()
        assert [e["fits"] for e in evidence.kernels.values()] == [fits]
        assert len(over) == (0 if fits else 1)


def test_the_extension_forward_is_checked_the_same_way(compiler):
    module = _module(ROOT / "solutions/flash_backward.py", "target_flash_backward")
    import torch

    from grader.worker import probes
    from triton.runtime.jit import JITFunction

    q = torch.randn(2, 256, 128, dtype=torch.float16)
    lse = torch.empty(2, 256, dtype=torch.float32)
    extras: dict = {}
    with probes.trace(extras, target.spec(devices.GB10)):
        JITFunction.run(module._flash_fwd, q, q, q, torch.empty_like(q), lse, 256, q.stride(0),
                        q.stride(1), 0.1, grid=(1,), warmup=True, BLOCK_M=128, BLOCK_N=128, D=128,
                        CAUSAL=False, num_warps=8, num_stages=3)
    (rec,) = extras["compiled"]
    assert rec["target"]["shared"] > SPARK_LIMIT, rec


def test_the_target_compile_is_cached_and_leaves_the_kernel_as_it_was(compiler):
    fwd = _module(ROOT / "solutions/flash_triton.py", "target_cache")._flash_fwd
    from grader.worker import resources
    from triton.runtime import driver

    before = fwd.device_caches
    spec = target.spec(devices.GB10)
    first = _traced(fwd, {"BLOCK_M": 64, "BLOCK_N": 64}, 4, 2, spec)["compiled"][0]["target"]
    size = len(resources._target_cache)
    again = _traced(fwd, {"BLOCK_M": 64, "BLOCK_N": 64}, 4, 2, spec)["compiled"][0]["target"]
    assert again == first and len(resources._target_cache) == size
    assert fwd.device_caches is before and driver.active.get_current_target().arch == 90
    assert "get_current_target" not in vars(driver.active)


def test_a_target_that_cannot_compile_is_recorded_not_raised(compiler, monkeypatch):
    from grader.worker import resources

    fwd = _module(ROOT / "solutions/flash_triton.py", "target_bad")._flash_fwd
    rec = _traced(fwd, {"BLOCK_M": 32, "BLOCK_N": 32}, 4, 2,
                  {"arch": 1, "warp_size": 32, "fallback": []})["compiled"][0]
    assert rec["shared"] > 0 and "not compiled" in rec["target"]["error"]
    e = target._entry("flash_triton", rec, SPARK_LIMIT)
    assert e["fits"] is None and e["error"]

    # ptxas without sm_121 (Triton <= 3.5): the next arch answers, and the record says which
    def old_ptxas(jitfn, args, kwargs, arch, warp_size, run):
        if arch == 121:
            raise RuntimeError("PTXASError: ptxas fatal: Value 'sm_121a' is not defined")
        return real(jitfn, args, kwargs, arch, warp_size, run)

    real = resources.compile_for
    monkeypatch.setattr(resources, "compile_for", old_ptxas)
    monkeypatch.setattr(resources, "_target_cache", {})
    tgt = _traced(fwd, {"BLOCK_M": 32, "BLOCK_N": 32}, 4, 2,
                  target.spec(devices.GB10))["compiled"][0]["target"]
    assert tgt["arch_asked"] == 121 and tgt["arch"] == 120 and "sm_121a" in tgt["tried"]


def test_no_target_records_this_device_only(compiler):
    fwd = _module(ROOT / "solutions/flash_triton.py", "target_none")._flash_fwd
    rec = _traced(fwd, {"BLOCK_M": 32, "BLOCK_N": 32}, 4, 2, None)["compiled"][0]
    assert "target" not in rec and rec["shared"] > 0


def test_the_interpreter_compiles_nothing_and_records_nothing(monkeypatch):
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    import triton
    import triton.language as tl

    from grader.worker import probes
    from triton.runtime.interpreter import InterpretedFunction

    def _copy(X, Y, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(Y + i, tl.load(X + i))

    kernel = InterpretedFunction(_copy)
    x = torch.arange(8, dtype=torch.float32)
    y = torch.zeros(8)
    extras: dict = {}
    monkeypatch.setattr(triton.knobs.runtime, "interpret", True, raising=False)
    with probes.trace(extras, target.spec(devices.GB10)):
        kernel[(1,)](x, y, N=8)
    assert extras["launches"] == 1 and "compiled" not in extras
    assert torch.equal(x, y)


# ------------------------------------------------------------------------ profile and flags


def test_profiles_are_found_by_short_name():
    assert target.lookup("gb10") is devices.GB10 and target.lookup("Spark") is devices.GB10
    assert devices.GB10.arch == 121 and devices.GB10.smem_per_block == SPARK_LIMIT
    assert target.lookup("h200") is devices.HOPPER and devices.HOPPER.arch == 90
    assert target.lookup(None) is None and target.lookup("") is None and target.lookup("none") is None
    with pytest.raises(target.UnknownTarget, match="gb10"):
        target.lookup("gb100")
    assert target.spec(devices.GB10) == {"arch": 121, "warp_size": 32, "fallback": [120, 80]}
    # the Spark's own tiles: every one fits its 99 KB by the estimate
    assert all(devices.flash_smem_bytes(bm, bn, s) <= SPARK_LIMIT
               for bm, bn, _, s in devices.GB10.flash_configs)


def test_the_perf_sweep_uses_the_targets_tiles_and_this_devices_thresholds():
    here = devices.profile_for((9, 0), "NVIDIA H200", 232448)
    tiles = target.tile_profile(here, devices.GB10)
    assert tiles.flash_configs == devices.GB10.flash_configs and (128, 128, 8, 3) not in tiles.flash_configs
    assert tiles.smem_per_block == SPARK_LIMIT
    assert (tiles.key, tiles.name) == (here.key, here.name)   # the bands are this device's
    assert verdicts.band("flash_triton", "vs_sdpa", tiles) == verdicts.band("flash_triton", "vs_sdpa", here)
    # flash_triton.speed_vs_sdpa's filter (Triton's default 3 stages) keeps the Spark's small tiles
    pairs = {(c[0], c[1]) for c in tiles.flash_configs
             if devices.flash_smem_bytes(c[0], c[1], 3) <= tiles.smem_per_block}
    assert (64, 64) in pairs and (128, 128) not in pairs


def _rec(bm, bn, stages, shared, **extra):
    return {"name": "_flash_fwd", "num_warps": 8 if bm == 128 else 4, "num_stages": stages,
            "constexprs": {"BLOCK_M": bm, "BLOCK_N": bn, "D": 128}, "arch": 90,
            "shared": shared + 40000, "target": {"arch_asked": 121, "arch": 121, "shared": shared},
            **extra}


def test_autotuner_configs_that_do_not_fit_are_skipped_not_failed():
    ev = target.Evidence(devices.GB10)
    ev.add("flash_backward", "flash_backward.forward_gpu",
           {"compiled": [_rec(128, 128, 3, 163840, autotuned=True),
                         _rec(64, 64, 2, 57344, autotuned=True)]})
    fail, skipped = ev.over_limit()
    assert fail == [] and [e["shared"] for e in skipped] == [163840]
    ev.add("flash_triton", "flash_triton.gpu_real_sizes", {"compiled": [_rec(128, 128, 3, 163840)]})
    fail, _ = ev.over_limit()
    assert [(e["exercise"], e["shared"]) for e in fail] == [("flash_triton", 163840)]


def test_forged_or_broken_records_are_skipped():
    ev = target.Evidence(devices.GB10)
    ev.add("flash_triton", "c", {"compiled": "lots"})
    ev.add("flash_triton", "c", {"compiled": [1, None, {"target": {"shared": -5}},
                                              {"target": {"shared": True}}]})
    assert all(e["fits"] is None for e in ev.kernels.values())
    assert ev.over_limit() == ([], [])


def _report(target_dict):
    from grader.registry import all_checks
    from grader.results import GradeReport, Result

    check = next(c for c in all_checks(include_hidden=False).values() if c.id == "flash_triton.uses_kernel")
    rep = GradeReport("solutions", "NVIDIA H200 (sm_90, 132 SMs)", [Result(check, "passed", check.points)],
                      1.0, ["gpu"], {})
    rep.target = target_dict
    return rep


def _fake_target():
    ev = target.Evidence(devices.GB10)
    ev.add("flash_triton", "flash_triton.speed_vs_sdpa",
           {"compiled": [_rec(128, 128, 3, 163840), _rec(64, 64, 2, 57344)]})
    return ev.to_dict("NVIDIA H200")


def test_every_report_says_the_target_and_names_the_kernel_that_does_not_fit():
    from rich.console import Console

    from grader import report

    rep = _report(_fake_target())
    header = ("target GB10 (sm_121): resources checked from compiled metadata; speed was "
              "measured on NVIDIA H200, not on the target")
    flag = ("_flash_fwd BLOCK_M=128, BLOCK_N=128, D=128, num_warps=8, num_stages=3: 163840 "
            "bytes of shared memory > 101376 on GB10")
    fails = "would fail with out of resources: shared memory on the Spark (Break It 5)"
    data = json.loads(json.dumps(report.to_json(rep)))
    assert data["device"] == rep.device and data["target"]["header"] == header
    (over,) = data["target"]["over_limit"]
    assert (over["shared"], over["limit"], over["exercise"]) == (163840, SPARK_LIMIT, "flash_triton")
    assert over["constexprs"] == {"BLOCK_M": 128, "BLOCK_N": 128, "D": 128}
    assert data["score"] == rep.score == rep.results[0].check.points   # the grade does not move
    md = report.to_markdown(rep).replace("\\", "")   # Markdown escapes _ as \_
    assert header in md and flag in md and fails in md and "## Target GB10 (sm_121)" in md
    buf = io.StringIO()
    report.print_terminal(rep, Console(file=buf, width=100, force_terminal=False))
    text = " ".join(buf.getvalue().split())
    assert header in text and flag in text and fails in text
    gs = report.to_gradescope(rep)["output"]
    assert header in gs and fails in gs


def test_no_target_no_mention_and_an_empty_run_says_so():
    from grader import report

    rep = _report({})
    assert report.to_json(rep)["target"] is None and "target" not in report.to_markdown(rep).lower()
    rep = _report(target.Evidence(devices.GB10).to_dict("CPU only"))
    assert "no Triton kernel was compiled for it" in report.to_markdown(rep)


# ------------------------------------------------------------------------ command line


def test_the_command_line_and_the_environment_pick_the_target(monkeypatch, tmp_path, capsys):
    from grader import cli, run

    seen = {}

    def fake_grade(submission, *a, **kw):
        seen["target"] = kw.get("target")
        profile = target.lookup(kw.get("target"))
        return _report(target.Evidence(profile).to_dict("here") if profile else {})

    monkeypatch.setattr(run, "grade", fake_grade)
    sub = tmp_path / "sub"
    sub.mkdir()
    out = tmp_path / "r.json"
    monkeypatch.delenv("GRADER_TARGET", raising=False)
    assert cli.main(["--submission", str(sub), "--quiet", "--json", str(out), "--target", "gb10"]) == 0
    assert seen["target"] == "gb10" and json.loads(out.read_text())["target"]["arch"] == 121
    monkeypatch.setenv("GRADER_TARGET", "spark")
    assert cli.main(["--submission", str(sub), "--quiet"]) == 0 and seen["target"] == "spark"
    assert cli.main(["--submission", str(sub), "--quiet", "--target", "none"]) == 0
    assert seen["target"] == "none"
    assert cli.main(["--submission", str(sub), "--quiet", "--target", "sm_999"]) == 2
    assert "unknown target" in capsys.readouterr().err
    monkeypatch.setenv("GRADER_TARGET", "nope")
    assert cli.main(["--submission", str(sub), "--quiet"]) == 2
    assert "GRADER_TARGET" in capsys.readouterr().err


def test_make_passes_target():
    text = (ROOT / "Makefile").read_text()
    assert "$(if $(TARGET),--target $(TARGET),)" in text


def test_gated_calls_on_cuda_ask_for_the_target_and_hand_over_the_records():
    import numpy as np

    from grader.fixtures import ProvingSubmission
    from grader.sandbox.proxy import CallResult

    class FakeSub:
        def __init__(self, mode, extras):
            self.mode, self.extras, self.sent, self.worker_pid = mode, extras, [], None

        def call(self, fn, *args, opts=None, **kwargs):
            self.sent.append(dict(opts or {}))
            return CallResult(np.zeros(3), extras=self.extras)

    trace = {"ops": ["empty_like"], "launches": 1, "triton_kernels": ["_flash_fwd"],
             "kernels": ["_flash_fwd"], "compiled": [_rec(128, 128, 3, 163840)]}
    ev = target.Evidence(devices.GB10)
    cuda = FakeSub("cuda", trace)
    ProvingSubmission(cuda, "flash_triton", target=ev, check_id="flash_triton.gpu_real_sizes").flash_fwd(1, 2, 3)
    assert cuda.sent[-1]["target"] == {"arch": 121, "warp_size": 32, "fallback": [120, 80]}
    (over,) = ev.over_limit()[0]
    assert over["checks"] == ["flash_triton.gpu_real_sizes"] and over["shared"] == 163840
    interp = FakeSub("interp", {k: v for k, v in trace.items() if k != "kernels"})
    ProvingSubmission(interp, "flash_triton", target=ev, check_id="flash_triton.ragged_n").flash_fwd(1, 2, 3)
    assert "target" not in interp.sent[-1] and ev.calls == 1
    plain = FakeSub("cuda", trace)
    ProvingSubmission(plain, "flash_triton").flash_fwd(1, 2, 3)     # no target asked: nothing changes
    assert "target" not in plain.sent[-1]


def test_the_worker_probe_takes_the_target_from_opts_and_its_record_crosses_the_codec(compiler):
    from grader.wire import codec
    from grader.worker import probes
    from triton.runtime.jit import JITFunction

    fwd = _module(ROOT / "solutions/flash_triton.py", "target_opts")._flash_fwd
    opts = {"trace": True, "target": target.spec(devices.GB10)}
    with probes.around_call(opts, [], {}) as extras:
        JITFunction.run(fwd, *_launch_args(), grid=(1,), warmup=True, BLOCK_M=64, BLOCK_N=64, D=128,
                        num_warps=4, num_stages=3)
    (rec,) = extras["compiled"]
    assert 0 < rec["target"]["shared"] <= SPARK_LIMIT   # 90112 with Triton 3.6 and 3.9
    back = codec.decode(codec.encode({"extras": extras}))
    assert back["extras"]["compiled"][0]["target"]["shared"] == rec["target"]["shared"]
