"""An untimed gpu check's replays begin as soon as each call returns (grader.plugin.ReplaysInThread),
beside the check's next calls: the verdict is the same as replaying at the check's end (the
first failed replay fails the check, a failed body earns nothing), and no replay outlives its
check, so none runs beside the timed checks after it."""

from __future__ import annotations

import os

import pytest

from grader import fixtures
from tests.helpers import plugin_session

CHECKS_FILE = '''
import os
import threading
import time

import pytest

from grader.judge.answers.compare import CheckFailed
from grader.plugin import PLUGIN_KEY


def log(what):
    with open(os.environ["PIPELINED_LOG"], "a") as f:
        f.write(what + "\\n")


def replays(request):
    return request.config.stash[PLUGIN_KEY].replays_of(request.node.nodeid, in_thread=True)


@pytest.mark.check("flash_triton.gpu_real_sizes")
def test_begun_at_once(request, credit):
    began = threading.Event()
    replays(request).append(lambda: (log("replay 1"), began.set()))
    assert began.wait(30)                       # before the check's next call, not at its end
    log("call 2")
    replays(request).append(lambda: log("replay 2"))
    credit.set(1.0, "")


@pytest.mark.check("softmax_triton.gpu_real_sizes")
def test_failed_replay(request, credit):
    def refused():
        raise CheckFailed("replaying its recorded launches gives another answer")
    replays(request).append(refused)
    replays(request).append(lambda: log("replay after the failure"))
    credit.set(1.0, "full credit, if its replays agree")


@pytest.mark.check("flash_decode.gpu_real_sizes")
def test_failed_body(request):
    replays(request).append(lambda: (time.sleep(0.5), log("running replay ends")))
    for _ in range(20):
        replays(request).append(lambda: log("queued replay ran"))
    raise CheckFailed("call 1 gave a wrong answer")


@pytest.mark.check("softmax_long.gpu_real_sizes")
def test_next_check():
    log("next check")
'''


def _grade(tmp_path):
    (tmp_path / "test_replays_in_thread_checks.py").write_text(CHECKS_FILE)
    log = tmp_path / "log.txt"
    os.environ["PIPELINED_LOG"] = str(log)
    plugin = plugin_session(tmp_path / "test_replays_in_thread_checks.py",
                            ["flash_triton", "softmax_triton", "flash_decode", "softmax_long"],
                            ["gpu"])
    return plugin, log.read_text().split("\n")[:-1]


def test_replays_in_a_thread_judge_like_replays_at_the_end(tmp_path):
    plugin, order = _grade(tmp_path)
    results = plugin.results
    assert order.index("replay 1") < order.index("call 2") < order.index("replay 2")
    assert results["flash_triton.gpu_real_sizes"].status == "passed"
    refused = results["softmax_triton.gpu_real_sizes"]
    assert refused.status == "failed" and refused.score == 0
    assert "another answer" in refused.message
    failed = results["flash_decode.gpu_real_sizes"]
    assert failed.status == "failed" and "wrong answer" in failed.message
    # the failed body's running replay ended before the next check began; the queued ones
    # were dropped (at most the one that had begun when the body failed ran)
    assert order.index("running replay ends") < order.index("next check")
    assert order.count("queued replay ran") <= 1
    assert not plugin.pending_replays


@pytest.mark.parametrize("layer, mode, gpu_alone, pipelined", [
    ("gpu", "cuda", False, True),
    ("gpu", "cuda", True, False),     # a check that needs the GPU to itself
    ("perf", "cuda", False, False),   # nothing beside a timed call
    ("interp", "interp", False, False),   # it would take the check's own core
])
def test_which_checks_pipeline(layer, mode, gpu_alone, pipelined):
    class Check:
        pass

    check = Check()
    check.layer, check.gpu_alone = layer, gpu_alone
    assert fixtures.replays_in_thread(check, mode) is pipelined




def test_a_real_grade_pipelined_gives_the_same_verdicts(tmp_path, monkeypatch):
    """The grader's own workers with every check's replays pipelined (on CUDA only the untimed
    gpu checks are; here the interp layer stands in for them, on this machine's CPU): the
    solution earns the same full marks, and a wrapper whose answer rides in launch scalars
    (softmax_triton's host_max_in_scalars, caught by the replay on fresh inputs) the same zeros."""
    from grader import run
    from grader.judge.source import audit
    from tests.helpers import ROOT, copy_solutions

    monkeypatch.setenv("GRADER_JOBS", "1")
    cheat = copy_solutions(tmp_path / "cheat", {"softmax_triton.py": (
        ROOT / "tests/exercises/softmax_triton/cheats/host_max_in_scalars/softmax_triton.py"
    ).read_text()})
    monkeypatch.setattr(audit, "audit", lambda directory, exercise: [])   # the replay's to catch

    def scores():
        return {s: {r.check.id: (r.status, r.score) for r in run.grade(
            s, ["softmax_triton"], ["interp"]).results if r.status != "not_run"}
            for s in (ROOT / "solutions", cheat)}

    plain = scores()
    monkeypatch.setattr(fixtures, "replays_in_thread", lambda check, mode: True)
    assert scores() == plain
    assert all(status == "passed" for status, _ in plain[ROOT / "solutions"].values())
    assert plain[cheat] and all(score == 0 for _, score in plain[cheat].values())
