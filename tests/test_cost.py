"""tools/cost.py: its sums and its GB10 model on a small made-up report, and docs/INSTRUCTORS.md's
cost table is what the tool makes from the committed H200 reports (so the docs cannot go stale).

The fixture, tests/fixtures/cost/: `make grade-gpu IMPL=solutions` and `make grade-gpu` (the
stubs) on one NVIDIA H200, the CPU layers beside the GPU layers and the timed checks last,
trimmed to the fields tools/cost.py reads."""

from __future__ import annotations

import json

import pytest

from tests.helpers import ROOT
from tools import cost

FIXTURE = ROOT / "tests" / "fixtures" / "cost"
REPORT, STUBS = FIXTURE / "solutions-h200.json", FIXTURE / "stubs-h200.json"


def _test(name, layer, seconds, status="passed"):
    return {"name": name, "exercise": name.split(".")[0], "layer": layer,
            "duration_s": seconds, "status": status}


def _report():
    """Two GPU exercises, one memory-bound and one compute-bound, and a CPU-only one; a GPU
    10x the GB10's bandwidth and 4x its tensor throughput (the figures passed to render)."""
    tests = [_test("online_softmax.a", "cpu", 1.0), _test("online_softmax.b", "adversarial", 2.0),
             _test("softmax_triton.c", "interp", 3.0), _test("softmax_triton.d", "gpu", 10.0),
             _test("softmax_triton.e", "perf", 20.0), _test("flash_triton.f", "perf", 30.0),
             _test("flash_triton.g", "perf", 5.0, "error"),
             _test("io_model.h", "gpu", 0.0, "not_run")]
    return {"tests": tests, "score": 9, "max_score": 10, "submission": "solutions",
            "elapsed_s": 70.0, "layer_seconds": {"cpu": 1.0, "adversarial": 2.0, "interp": 3.0,
                                                 "gpu": 10.0, "perf": 55.0},
            "device_info": {"cuda": True, "name": "Test GPU", "copy_gbs": 1000.0,
                            "matmul_tflops": 400.0}}


STUB_REPORT = {"tests": [_test("softmax_triton.d", "gpu", 4.0),
                         _test("flash_triton.f", "perf", 50.0)]}


def test_the_seconds_are_the_checks_summed_per_exercise_and_layer():
    per = cost.seconds(_report())
    assert per == {"online_softmax": {"cpu": 1.0, "adversarial": 2.0},
                   "softmax_triton": {"interp": 3.0, "gpu": 10.0, "perf": 20.0},
                   "flash_triton": {"perf": 35.0}}   # a check not run costs nothing and is no row


def test_the_gb10_model_scales_all_but_the_stubs_seconds_by_the_ceilings_ratio():
    report = _report()
    ratio = cost.ratios(report, gb10_gbs=100.0, gb10_tflops=100.0)
    assert ratio == {"memory": 10.0, "compute": 4.0}
    got = cost.gb10_seconds(report, STUB_REPORT, ratio)
    # softmax_triton (memory): 4 s fixed + 6 s x 10; 20 s x 10 with no stub time.
    # flash_triton (compute): the stub's 50 s is more than the check's 30 s, so all 30 s are
    # fixed; the stopped check's 5 s x 4
    assert got == {"softmax_triton": {"gpu": 64.0, "perf": 200.0}, "flash_triton": {"perf": 50.0}}
    # the wall: the run's, its gpu and perf checks' 65 s replaced by the model's 314 s
    assert cost.wall_gb10(report, got) == pytest.approx(70.0 - 65.0 + 314.0)
    # an exercise the tool does not know is scaled by the larger ratio (an upper bound)
    unknown = {"tests": [_test("new_kernel.x", "perf", 2.0)], "elapsed_s": 2.0}
    assert cost.gb10_seconds(unknown, None, ratio) == {"new_kernel": {"perf": 20.0}}
    # no ceilings in the report, or a GB10's own report: no model
    assert cost.ratios({"device_info": {"name": "CPU only"}}, 100.0, 100.0) is None
    gb10 = {"device_info": {"copy_gbs": 250.0, "matmul_tflops": 100.0, "profile": cost.GB10.name}}
    assert cost.ratios(gb10, 100.0, 100.0) is None


def test_the_table_totals_the_wall_and_the_class_cost():
    text = cost.render(_report(), STUB_REPORT, "stubs.json", n=100, gbs=100.0, tflops=100.0)
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:] for line in text.splitlines()
            if line.startswith("| ")}
    # cpu, adversarial, interp, gpu, perf, sum, GB10 gpu, GB10 perf, GB10 sum, bound
    assert rows["softmax_triton"][:10] == ["–", "–", "3.0", "10.0", "20.0", "33.0", "64.0",
                                           "200.0", "267.0", "memory |"]
    assert rows["**sum of checks**"][:9] == ["1.0", "2.0", "3.0", "10.0", "55.0", "71.0", "64.0",
                                             "250.0", "320.0"]
    assert rows["**wall** (elapsed_s)"][5] == "70.0" and rows["**wall** (elapsed_s)"][8] == "319.0"
    assert "wall, 70.0 s, is less than the sum of the layers, 71.0 s" in text
    assert "Stopped by a grader error in this run" in text and "flash_triton.g" in text
    assert "an estimate from a model, not a measurement" in text and "upper bound" in text
    # 100 x 70 s on one GPU; a 4 h task has room for int(14400 / 105) = 137: one task
    assert "100 x 70 s = 1.9 h on one GPU, 51.4 submissions per hour" in text
    assert "room for 137" in text and "`--array=0-0` for 100" in text
    # 319 s on the GB10: room for int(14400 / 478.5) = 30, so 4 tasks for 100
    assert "100 x 319 s = 8.9 h on one GPU, 11.3 submissions per hour" in text
    assert "room for 30 " in text and "`--array=0-3` for 100" in text


def test_the_instructors_cost_table_is_the_tools_output_for_the_committed_run():
    text = (ROOT / "docs" / "INSTRUCTORS.md").read_text()
    block = text.split("<!-- cost:")[1].split("-->", 1)[1].split("<!-- /cost -->")[0]
    want = cost.render(json.loads(REPORT.read_text()), json.loads(STUBS.read_text()),
                       STUBS.relative_to(ROOT).as_posix())
    assert block.strip() == want.strip(), "run the command beside the table and paste its output"
    # the command the docs give beside the table is the one that makes it
    assert (f"python -m tools.cost {REPORT.relative_to(ROOT).as_posix()} "
            f"--stubs {STUBS.relative_to(ROOT).as_posix()}") in text


def test_a_grade_that_timed_first_says_the_gb10_model_overstates():
    plain = cost.render(_report(), STUB_REPORT, "stubs.json", gbs=100.0, tflops=100.0)
    assert "This grade timed first" not in plain
    for marked in ({"timed_first": True}, {"notes": ["The timed checks ran first, with the GPU "
                                                     "and the CPUs alone; then ..."]}):
        text = cost.render({**_report(), **marked}, STUB_REPORT, "stubs.json", gbs=100.0,
                           tflops=100.0)
        assert "This grade timed first" in text and "--no-timed-first" in text
