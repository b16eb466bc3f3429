"""The CPU layers of several exercises graded side by side (grader.parallel): the same report as
one process, progress for every check, and a grading process that dies is the grader's failure."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from grader import parallel, schedule
from grader.registry import all_checks
from tests.helpers import GRADER, ROOT, SOLUTIONS, logged_requests, set_options

EXERCISES = "online_softmax,tiled_attention"


def graded(tmp_path, jobs: str) -> dict:
    out = tmp_path / f"report-{jobs}.json"
    env = dict(os.environ, GRADER_JOBS=jobs)
    proc = subprocess.run([*GRADER, "--submission", str(SOLUTIONS), "--exercises", EXERCISES,
                           "--layers", "cpu,adversarial", "--quiet", "--json", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_parallel_report_equals_one_process(tmp_path):
    one, two = graded(tmp_path, "1"), graded(tmp_path, "2")
    fields = ("status", "score", "max_score", "hidden", "layer")
    assert ({t["name"]: [t[f] for f in fields] for t in one["tests"]}
            == {t["name"]: [t[f] for f in fields] for t in two["tests"]})
    assert two["totals"]["score"] == two["totals"]["max_score"] > 0
    assert set(two["layer_seconds"]) == {"cpu", "adversarial"}
    assert two["timed_first"] is False        # no GPU: nothing timed, nothing first
    assert two["isolation"] == one["isolation"] and two["seccomp"] == one["seccomp"] != ""


def test_jobs(monkeypatch):
    monkeypatch.setenv("GRADER_JOBS", "3")
    assert schedule.jobs_for(["a", "b"], ["cpu"]) == 2          # never more than the exercises
    assert schedule.jobs_for(["a"], ["cpu", "interp"]) == 1     # nothing to split
    assert schedule.jobs_for(["a", "b"], ["perf"]) == 1         # timed work stays in one process
    monkeypatch.delenv("GRADER_JOBS")
    schedule.budget.memory_bytes.cache_clear()
    set_options(monkeypatch, memory_mb=768)                     # Gradescope's default container
    try:
        assert schedule.jobs_for(["a", "b", "c"], ["cpu"]) == 1
    finally:
        schedule.budget.memory_bytes.cache_clear()


def test_split_plan(monkeypatch):
    """The untimed gpu layer goes to the parallel processes only with CUDA, cores to spare and
    no target, and never for an exercise with a check that needs the GPU to itself."""
    checks = all_checks(include_hidden=False)
    layers = ["cpu", "adversarial", "interp", "gpu", "perf"]
    exercises = ["bench_attn", "flash_triton", "online_softmax"]
    set_options(monkeypatch, gpu_split=True)
    plan = schedule.split_plan(exercises, layers, checks, cuda=True)
    assert plan == {"bench_attn": ["cpu", "adversarial"],   # gpu_sweep judges free memory
                    "flash_triton": ["adversarial", "interp", "gpu"],
                    "online_softmax": ["cpu", "adversarial"]}
    assert any(c.gpu_alone for c in checks.values() if c.exercise == "bench_attn")
    no_gpu = {"bench_attn": ["cpu", "adversarial"], "flash_triton": ["adversarial", "interp"],
              "online_softmax": ["cpu", "adversarial"]}
    assert schedule.split_plan(exercises, layers, checks, cuda=False) == no_gpu
    assert schedule.split_plan(exercises, layers, checks, cuda=True, target=object()) == no_gpu
    set_options(monkeypatch, gpu_split=False)
    assert schedule.split_plan(exercises, layers, checks, cuda=True) == no_gpu
    assert schedule.split_plan(exercises, ["gpu", "perf"], checks, cuda=False) == {}


def test_cpu_quota(tmp_path):
    assert schedule.cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("50000 100000\n")          # v2: half a CPU
    assert schedule.cpu_quota(tmp_path) == 0.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")   # v1: two CPUs
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert schedule.cpu_quota(tmp_path) == 2.0


@pytest.mark.parametrize("dead_first", [False, True])
def test_a_grading_process_that_dies_is_a_grader_error(tmp_path, monkeypatch, dead_first):
    """Dead before or after its request reached it (dead_first: its stdin is a broken pipe
    when the request is written, a race CI lost once): the grader's error, never a crash."""
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "parallel_part.py").write_text("import sys\nsys.stderr.write('boom')\nsys.exit(7)\n")
    monkeypatch.setattr(parallel, "ROOT", tmp_path)
    if dead_first:
        send = parallel._Child.send
        monkeypatch.setattr(parallel._Child, "send",
                            lambda self, request: (self.proc.wait(), send(self, request)))
    checks = all_checks(include_hidden=False)
    seen = []
    results, _, _, _ = parallel.grade_cpu_layers(SOLUTIONS, {"online_softmax": ["cpu"],
                                                             "tiled_attention": ["cpu"]},
                                                 2, checks, False, None, None,
                                                 progress=lambda *a: seen.append(a))
    mine = [c for c in checks.values() if c.layer == "cpu"
            and c.exercise in ("online_softmax", "tiled_attention")]
    assert mine and set(results) == {c.id for c in mine}
    for r in results.values():
        assert r.grader_error and r.status == "error" and r.score == 0
        assert "exit 7" in r.message and "boom" in r.message and "not your code's fault" in r.message
    assert not seen


def test_results_cross_intact():
    check = next(iter(all_checks(include_hidden=False).values()))
    r = parallel.Result(check, "failed", 0.5, "expected 1, got 2", "printed", 1.25, "a hint",
                        ("x.y",), False, True, "not decided in this run: ...")
    assert parallel.result_from(check, json.loads(json.dumps(parallel.result_to_dict(r)))) == r


def test_background_returns_or_raises():
    ran = parallel.Background(lambda: 42)
    ran.start()
    assert ran.result() == 42 and ran.started

    def boom():
        raise KeyError("x")

    failed = parallel.Background(boom)
    failed.run()
    try:
        failed.result()
    except KeyError:
        pass
    else:
        raise AssertionError("the exception of the background part was lost")


def test_overlap_switch(monkeypatch):
    set_options(monkeypatch, overlap=False)
    assert not schedule.may_overlap()
    set_options(monkeypatch, overlap=True)
    assert schedule.may_overlap()
    set_options(monkeypatch, overlap=None)
    assert schedule.may_overlap() == (len(os.sched_getaffinity(0)) >= schedule.OVERLAP_CORES)


def test_progress_counts_every_part():
    from grader.run import ProgressCount

    seen = []
    counter = ProgressCount(lambda check, done, total: seen.append((check, done, total)))
    counter.cpu("a", 0, 10)
    counter.here("b", 0, 5)
    counter.gpu("d", 1, 4)
    counter.cpu("c", 3, 10)
    assert seen == [("a", 0, 10), ("b", 0, 15), ("d", 1, 19), ("c", 4, 19)]


def test_divide_and_merge(monkeypatch):
    """On a GPU box with cores to spare the CPU layers get processes of their own (beside the
    gpu layer's and the timed checks), and the two parts' returns make one."""
    plan = {"a": ["cpu", "interp", "gpu"], "b": ["cpu"], "c": ["gpu"]}
    cpu, gpu = schedule.divide(plan)
    assert cpu == {"a": ["cpu", "interp"], "b": ["cpu"]} and gpu == {"a": ["gpu"], "c": ["gpu"]}
    monkeypatch.setenv("GRADER_JOBS", "3")
    assert schedule.beside_jobs(8) == 3
    monkeypatch.delenv("GRADER_JOBS")
    assert 1 <= schedule.beside_jobs(8) <= 4
    check = next(iter(all_checks(include_hidden=False).values()))
    r = parallel.Result(check, "passed", 1.0)
    merged = parallel.merge([({"x": r}, {"cpu": 1.5}, ["n1"], {"isolation": "", "seccomp": {"cpu": "p"}}),
                             ({}, {"cpu": 2.0, "gpu": 3.0}, ["n2"],
                              {"isolation": "os", "seccomp": {"cuda": "q"}, "device_info": {"name": "H"}})])
    assert merged == ({"x": r}, {"cpu": 3.5, "gpu": 3.0}, ["n1", "n2"],
                      {"isolation": "os", "seccomp": {"cpu": "p", "cuda": "q"},
                       "device_info": {"name": "H"}})


def test_gpu_jobs_one_per_check_where_the_cores_allow(monkeypatch):
    """The untimed gpu checks get a process each (the longest check bounds them: one that waits
    for a process adds its whole time), within the cores the CPU layers' processes leave."""
    monkeypatch.delenv("GRADER_JOBS", raising=False)
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert schedule.gpu_jobs(10, 4) == 10                       # the lab's ten on a 16-core box
    assert schedule.gpu_jobs(30, 4) == schedule.MAX_GPU_JOBS
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert schedule.gpu_jobs(10, 2) == 6
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: set(range(2)))
    assert schedule.gpu_jobs(10, 4) == 1
    monkeypatch.setenv("GRADER_JOBS", "3")
    assert schedule.gpu_jobs(10, 4) == 3


def test_after_timing_the_cpu_layers_take_the_cores_left(monkeypatch):
    """Timing first, the CPU layers wait for the timing to end, then take the cores the gpu
    checks' processes leave, one request per layer (the heaviest exercise's layers side by side)."""
    monkeypatch.delenv("GRADER_JOBS", raising=False)
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert schedule.after_timing_jobs(4, 10) == 6
    assert schedule.after_timing_jobs(4, 14) == 4        # never fewer than beside the timing
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: set(range(64)))
    assert schedule.after_timing_jobs(4, 10) == schedule.MAX_JOBS
    monkeypatch.setenv("GRADER_JOBS", "3")
    assert schedule.after_timing_jobs(3, 3) == 3


def test_by_layer_one_request_per_layer(tmp_path, monkeypatch):
    """`by_layer` (timing first, many cores): each CPU layer of an exercise is a request of
    its own; otherwise an exercise's layers go together (its workers started once)."""
    log = logged_requests(tmp_path, monkeypatch)
    checks = all_checks(include_hidden=False)
    plan = {"flash_decode": ["cpu", "adversarial", "interp"], "online_softmax": ["cpu"]}
    for by_layer, want in ((True, {("flash_decode", ("cpu",)), ("flash_decode", ("adversarial",)),
                                   ("flash_decode", ("interp",)), ("online_softmax", ("cpu",))}),
                           (False, {("flash_decode", ("cpu", "adversarial", "interp")),
                                    ("online_softmax", ("cpu",))})):
        log.unlink(missing_ok=True)
        parallel.grade_cpu_layers(SOLUTIONS, plan, 2, checks, False, None, None,
                                  by_layer=by_layer)
        sent = [json.loads(line) for line in log.read_text().splitlines()]
        assert {(r["exercise"], tuple(r["layers"])) for r in sent} == want


def test_every_count_of_processes_keeps_to_the_cgroups_cpu_limit(monkeypatch):
    """A container's CPU limit is not in the affinity mask: the processes for the CPU layers,
    for the untimed gpu checks, after the timing and beside it, and whether to overlap at all,
    are all counted from the cores the limit leaves."""
    monkeypatch.delenv("GRADER_JOBS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    for quota, cores in ((None, 16), (4.0, 4), (0.5, 1)):
        monkeypatch.setattr(schedule, "cpu_quota", lambda q=quota: q)
        assert schedule.usable_cores() == cores
        assert schedule.gpu_jobs(40, 1) == min(cores - 1 or 1, schedule.MAX_GPU_JOBS)
        assert schedule.after_timing_jobs(1, 1) == max(1, min(schedule.MAX_JOBS, cores - 1))
        assert schedule.beside_jobs(10) == max(1, min(4, cores // 4))
        assert schedule.may_overlap() is (cores >= schedule.OVERLAP_CORES)


def test_the_longest_request_goes_first():
    """An H100 grade of the solutions (docs/MEASUREMENTS.md) ended 12 s after the rest on
    flash_decode's interp layer, begun eighth of the CPU layers' requests by their checks' count;
    by the seconds each layer took (Exercise.seconds) it goes first, and the longest is never
    begun after a shorter one."""
    from grader.registry import EXERCISES

    checks = all_checks()
    plan = schedule.split_plan(list(EXERCISES), ["cpu", "adversarial", "interp"], checks, cuda=False)
    mine = [c for c in checks.values() if c.layer in plan.get(c.exercise, ())]
    queue = schedule.queue_for(plan, mine, by_layer=True)
    assert queue[0][:2] == ("flash_decode", ["interp"])
    took = [EXERCISES[e].seconds.get(layers[0], 0.0) for e, layers, _ in queue]
    assert took == sorted(took, reverse=True)
    by_exercise = schedule.queue_for(plan, mine)
    assert [r[0] for r in by_exercise[:2]] == ["flash_decode", "flash_backward"]
