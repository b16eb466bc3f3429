"""Timing first, checking after (grader.run, schedule.timed_first): a check's `after_timing` work runs
at its end, or, while the plugin defers, after every check of the session, once `after_timed`
has started the rest of the grade; its exception is the check's outcome either way."""

from __future__ import annotations

import os
import shutil

import pytest

from grader import schedule
from grader.registry import ROOT
from tests.helpers import plugin_session, set_options

CHECKS_FILE = '''
import os

import pytest

from grader.judge.answers.compare import CheckFailed


def log(what):
    with open(os.environ["DEFERRED_LOG"], "a") as f:
        f.write(what + "\\n")


@pytest.mark.check("softmax_triton.bandwidth")
def test_half(credit, after_timing):
    log("body half")
    credit.set(0.5, "half the credit")
    after_timing(lambda: log("later half"))


@pytest.mark.check("softmax_long.bandwidth")
def test_wrong(credit, after_timing):
    log("body wrong")
    credit.set(1.0, "full credit, if its outputs are right")

    def verify():
        log("later wrong")
        raise CheckFailed("call 3 of 12 in timed request 2 gave a wrong output")
    after_timing(verify)


@pytest.mark.check("flash_triton.speed_vs_sdpa")
def test_failed_body(credit, after_timing):
    log("body failed")
    after_timing(lambda: log("later failed"))
    raise CheckFailed("below the roofline floor")
'''


def _grade(tmp_path, deferring: bool):
    for ex in ("softmax_triton", "softmax_long", "flash_triton"):
        shutil.copy(ROOT / "solutions" / f"{ex}.py", tmp_path / f"{ex}.py")
    (tmp_path / "test_checks.py").write_text(CHECKS_FILE)
    log = tmp_path / "log.txt"
    os.environ["DEFERRED_LOG"] = str(log)

    def configure(plugin):
        plugin.deferring = deferring
        plugin.after_timed = lambda: log.open("a").write("after_timed\n")

    plugin = plugin_session(tmp_path / "test_checks.py",
                            ["softmax_triton", "softmax_long", "flash_triton"], ["perf"], configure)
    return plugin.results, log.read_text().split("\n")[:-1]


@pytest.mark.parametrize("deferring", [False, True])
def test_later_work_decides_the_check(tmp_path, deferring):
    results, order = _grade(tmp_path, deferring)
    if deferring:   # every body first, then what after_timed starts, then the later work
        assert order[:4] == ["body half", "body wrong", "body failed", "after_timed"]
        assert sorted(order[4:]) == ["later half", "later wrong"]   # side by side
    else:   # at each check's end; a check that failed in its body runs none
        assert order == ["body half", "later half", "body wrong", "later wrong", "body failed"]
    half, wrong, failed = (results[c] for c in ("softmax_triton.bandwidth",
                                                 "softmax_long.bandwidth",
                                                 "flash_triton.speed_vs_sdpa"))
    assert (half.status, half.message) == ("failed", "half the credit")
    assert half.score == pytest.approx(half.check.points / 2)
    assert wrong.status == "failed" and wrong.score == 0 and "wrong output" in wrong.message
    assert failed.status == "failed" and "roofline" in failed.message


def test_timed_first_only_where_no_untimed_gpu_check_runs_here(monkeypatch):
    big, small = 141 << 30, 48 << 30   # an H200; a 48 GB card (an 80 GB H100 times first too)
    every = ["cpu", "adversarial", "interp", "gpu", "perf"]
    split = {"flash_triton": ["gpu"]}
    assert schedule.timed_first(split, ["perf", "gpu"], every, big)
    assert schedule.timed_first(split, ["perf", "gpu"], every, 79 << 30)
    assert not schedule.timed_first(split, ["perf", "gpu"], every, small)
    assert not schedule.timed_first(split, ["perf"], every, big, unified=True)
    assert not schedule.timed_first({}, ["perf", "gpu"], every, big)   # the untimed checks here
    assert not schedule.timed_first(split, ["gpu"], every, big)        # no perf here
    # the perf layer alone (or with CPU layers): nothing untimed on the GPU to wait for
    assert schedule.timed_first({}, ["perf"], ["perf"], big)
    assert schedule.timed_first({}, ["perf"], ["cpu", "perf"], big)
    assert not schedule.timed_first({}, ["perf"], ["perf"], small)
    assert not schedule.timed_first({}, ["perf"], ["perf"], big, target=object())   # its record
    monkeypatch.setattr(schedule.budget, "one_exercise_at_a_time", lambda: True)
    assert not schedule.timed_first({}, ["perf"], ["perf"], big)       # one exercise's workers
    assert schedule.timed_first(split, ["perf", "gpu"], every, big)
    monkeypatch.undo()
    set_options(monkeypatch, timed_first=True)
    assert schedule.timed_first(split, ["perf"], every, small)
    assert not schedule.timed_first({}, ["perf", "gpu"], every, small)   # never with them here
    set_options(monkeypatch, timed_first=False)
    assert not schedule.timed_first(split, ["perf"], every, big)
    assert not schedule.timed_first({}, ["perf"], ["perf"], big)


def test_the_note_on_timing_first_names_what_ran_after_it():
    both = schedule.timed_first_note(10, 6, {"flash_triton": ["gpu"]}, {"io_model": ["cpu"]})
    assert both == ("The timed checks ran first, with the GPU and the CPUs alone; then the gpu "
                    "layer's untimed checks ran in 10 grading processes side by side, and the CPU "
                    "layers in 6, beside the verification of every timed output and the timed "
                    "checks' gated calls.")
    cpu = schedule.timed_first_note(1, 6, {}, {"io_model": ["cpu"]})
    assert "then the CPU layers ran in 6 grading processes, beside the verification" in cpu
    assert "gpu layer" not in cpu
    alone = schedule.timed_first_note(1, 1, {}, {})
    assert alone.endswith("alone; the verification of every timed output and the timed checks' "
                          "gated calls came after all of them.")


def test_the_checks_say_what_they_defer():
    """Every perf check that verifies timed outputs does it through `after_timing` (or a helper that
    takes it), never inline, so timing first holds nothing back that it should not."""
    for path in sorted((ROOT / "grader" / "exercises").glob("*/test_perf.py")):
        text = path.read_text()
        assert ".verify()" not in text, path
        assert "after_timing" in text, path


class _Stop(Exception):
    pass


@pytest.mark.parametrize("layers, timed_first", [
    (["perf"], True),                            # the perf layer alone: nothing untimed on the GPU
    (["cpu", "perf"], True),
    (["cpu", "adversarial", "interp", "gpu", "perf"], None),   # decided by the split (below)
    (None, None),                                # every layer: the command names none
])
def test_grade_asks_whether_to_time_first_with_the_layers_it_runs(monkeypatch, layers, timed_first):
    """grader.run hands schedule.timed_first the layers it runs (not the command's, which may
    be None), what stays in its own process, and the GPU's memory: on a CPU machine faked to
    have an 80 GB GPU, a perf-only grade times first; every layer times first only with the
    untimed gpu checks split off."""
    from grader import run
    from grader.environment import Environment

    big = Environment(have={"numpy", "torch", "triton", "cuda"}, device="fake", cuda_probed=True,
                      gpu_bytes=80 << 30)
    monkeypatch.setattr(run, "detect", lambda want_cuda=True: big)
    seen = {}
    real = schedule.timed_first

    def spy(gpu_plan, here, layers_run, gpu_bytes, unified=False, target=None):
        seen.update(gpu_plan=gpu_plan, here=here, layers=layers_run,
                    answer=real(gpu_plan, here, layers_run, gpu_bytes, unified, target))
        raise _Stop   # before any check runs: this machine has no GPU

    monkeypatch.setattr(schedule, "timed_first", spy)
    with pytest.raises(_Stop):
        run.grade(ROOT / "solutions", ["flash_decode", "softmax_triton"], layers)
    assert seen["layers"] == (layers or ["cpu", "adversarial", "interp", "gpu", "perf"])
    assert "perf" in seen["here"]
    expected = bool(seen["gpu_plan"]) if timed_first is None else timed_first
    assert seen["answer"] is expected
