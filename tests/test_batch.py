"""python -m grader batch: a folder of submissions becomes one gradebook row each, with the
same isolation as a single run, reports per submission, shards and merged gradebooks."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.batch import find_submissions, visible_gpus
from grader.registry import all_checks
from tests.helpers import EXERCISES, ROOT, copy_solutions

EXS = ("online_softmax", "tiled_attention")
LAYERS = ("cpu", "adversarial")


def batch(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "batch", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def points(exercise: str, minus: tuple = ()) -> int:
    return sum(c.points for c in all_checks().values()
               if c.exercise == exercise and c.layer in LAYERS and c.id not in minus)


def read(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_batch_gradebook(tmp_path):
    subs = tmp_path / "subs"
    copy_solutions(subs / "a_solutions")
    shutil.copytree(EXERCISES, subs / "b_stubs")
    copy_solutions(subs / "c_segfault")
    shutil.copy(ROOT / "tests/submissions/segfault/online_softmax.py", subs / "c_segfault")
    copy_solutions(subs / "d_cheat")   # right outputs, Q scaled in place: loses inputs_untouched only
    shutil.copy(ROOT / "tests/exercises/tiled_attention/wrong/qa_tiled_q_scaled_in_place"
                / "tiled_attention.py", subs / "d_cheat")
    out = tmp_path / "out"
    proc = batch(str(subs), "--out", str(out), "--jobs", "2", "--exercises", ",".join(EXS),
                 "--layers", ",".join(LAYERS))
    assert proc.returncode == 0, proc.stderr

    on, ti = points("online_softmax"), points("tiled_attention")
    cheat = points("tiled_attention", minus=("tiled_attention.inputs_untouched",))
    top = str(on + ti)
    expected = [
        ["a_solutions", str(on), str(ti), str(on + ti), top, "", ""],
        ["b_stubs", "0", "0", "0", top, "", ""],
        ["c_segfault", "0", str(ti), str(ti), top, "", ""],
        ["d_cheat", str(on), str(cheat), str(on + cheat), top, "", ""],
    ]
    with open(out / "gradebook.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["submission", *EXS, "total", "max", "note", "undecided"]
    assert rows[1:] == expected
    for name in ("a_solutions", "b_stubs", "c_segfault", "d_cheat"):
        assert (out / "reports" / f"{name}.json").is_file()
        assert (out / "reports" / f"{name}.md").read_text().startswith("# Grade:")
    # the static audit refuses ctypes before the file runs, and says where
    assert "online_softmax.py:2: import ctypes" in (out / "reports" / "c_segfault.md").read_text()


def test_shards_cover_every_submission_once(tmp_path):
    for name in ("e", "a", "d", "c", "b", ".hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("")
    shards = [[p.name for p in find_submissions(tmp_path, (i, 3))] for i in range(3)]
    assert shards == [["a", "d"], ["b", "e"], ["c"]]


def test_merge_joins_shards_and_refuses_mismatches(tmp_path):
    header = ["submission", "online_softmax", "total", "max", "note"]
    for name, rows in (("s0.csv", [["bob", "3", "3", "19", ""]]),
                       ("s1.csv", [["alice", "19", "19", "19", ""], ["carl", "", "", "", "failed"]])):
        with open(tmp_path / name, "w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    merged = tmp_path / "merged.csv"
    proc = batch("--merge", str(tmp_path / "s0.csv"), str(tmp_path / "s1.csv"), "--out", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert [r["submission"] for r in read(merged)] == ["alice", "bob", "carl"]
    assert read(merged)[1] == dict(zip(header, ["bob", "3", "3", "19", ""]))

    proc = batch("--merge", str(tmp_path / "s0.csv"), str(tmp_path / "s0.csv"), "--out", str(merged))
    assert proc.returncode == 2 and "bob is in both" in proc.stderr
    with open(tmp_path / "other.csv", "w", newline="") as f:
        csv.writer(f).writerows([["submission", "total"], ["dan", "1"]])
    proc = batch("--merge", str(tmp_path / "s0.csv"), str(tmp_path / "other.csv"), "--out", str(merged))
    assert proc.returncode == 2 and "same --exercises" in proc.stderr


def test_bad_arguments(tmp_path):
    for args, words in ((("--shard", "3/3", str(tmp_path)), "need 0 <= I < N"),
                        ((str(tmp_path / "nope"),), "no such folder"),
                        ((), "give SUBMISSIONS_DIR")):
        proc = batch(*args)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr


def test_gpus_come_from_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


def test_gpus_all_grades_one_submission_per_gpu_at_a_time(tmp_path, monkeypatch, capsys):
    """--gpus all: one job per visible GPU, each grade pinned to a GPU no other grade holds
    while it runs, and a progress line with the time left after each submission."""
    import threading
    import time

    from grader import batch as b

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    for i in range(6):
        (tmp_path / "subs" / f"s{i}").mkdir(parents=True)
    held, cores, seen, lock = set(), set(), [], threading.Lock()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})

    def fake_grade(sub, out, args, exercises, gpu, cpus=None):
        with lock:
            assert gpu not in held, f"GPU {gpu} given to two grades at once"
            assert cpus and not set(cpus) & cores, f"cores {cpus} given to two grades at once"
            held.add(gpu)
            cores.update(cpus)
            seen.append((gpu, args.jobs))
        time.sleep(0.05)
        with lock:
            held.discard(gpu)
            cores.difference_update(cpus)
        return {"submission": sub.name, "total": "1", "max": "2", "note": ""}

    monkeypatch.setattr(b, "grade_one", fake_grade)
    args = b.parser().parse_args([str(tmp_path / "subs"), "--out", str(tmp_path / "out"),
                                  "--gpus", "all"])
    assert b.grade_all(args) == 0
    assert sorted({g for g, _ in seen}) == ["3", "5"] and len(seen) == 6
    assert {jobs for _, jobs in seen} == {2}
    printed = capsys.readouterr().out
    assert "1/6 graded, about" in printed and "6/6 graded" in printed
    assert len(read(tmp_path / "out" / "gradebook.csv")) == 6


STOPPED_BATCH = """
import json, os, sys
from pathlib import Path
from grader import batch as b

def fake(sub, out, args, exercises, gpu, cpus=None):
    what = {"s0": {"total": "3"}, "s1": {"undecided": "flash_decode.bandwidth"},
            "s2": {"total": "", "note": "grading failed (exit 1); grade this submission alone"},
            }.get(sub.name, {})
    if sub.name == "s3":
        os._exit(3)   # the machine goes away half way
    row = {"submission": sub.name, "online_softmax": "19", "total": "19", "max": "19", "note": "",
           "undecided": "", **what}
    if not row["note"]:
        (out / "reports" / f"{sub.name}.json").write_text(json.dumps(
            {"score": float(row["total"]), "max_score": 19.0}))
    return row

b.grade_one = fake
sys.exit(b.main(sys.argv[1:]))
"""


def test_again_goes_on_from_the_gradebook_a_stopped_batch_left(tmp_path, monkeypatch, capsys):
    """The gradebook is rewritten after each submission, so a batch stopped half way keeps the
    rows it finished; --again grades only what has no row, a failed, undecided or cut-short
    row, or a row whose report is gone or older than its submission, keeps the other rows,
    carries those outside --shard as they were, and refuses another selection."""
    import json
    import time

    from grader import batch as b

    for i in range(6):
        (tmp_path / "subs" / f"s{i}").mkdir(parents=True)
        (tmp_path / "subs" / f"s{i}" / "online_softmax.py").write_text("")
    out, book = tmp_path / "out", tmp_path / "out" / "gradebook.csv"
    flags = ["--out", str(out), "--exercises", "online_softmax"]
    proc = subprocess.run([sys.executable, "-c", STOPPED_BATCH, str(tmp_path / "subs"), *flags],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 3, proc.stderr
    assert [r["submission"] for r in read(book)] == ["s0", "s1", "s2"]
    graded = []

    def again(sub, out, args, exercises, gpu, cpus=None):
        graded.append(sub.name)
        (out / "reports" / f"{sub.name}.json").write_text(json.dumps({"score": 19.0, "max_score": 19.0}))
        return {"submission": sub.name, "online_softmax": "19", "total": "19", "max": "19",
                "note": "", "undecided": ""}

    def grade(*more):
        graded.clear()
        return b.grade_all(b.parser().parse_args([str(tmp_path / "subs"), *flags, *more]))

    monkeypatch.setattr(b, "grade_one", again)
    assert grade("--again") == 0 and graded == ["s1", "s2", "s3", "s4", "s5"]
    rows = {r["submission"]: r for r in read(book)}
    assert rows["s0"]["total"] == "3" and all(rows[f"s{i}"]["total"] == "19" for i in range(1, 6))
    assert "gradebook.csv: 1; submissions to grade: 5" in capsys.readouterr().err
    assert grade("--again") == 0 and graded == []             # nothing left to grade
    # a submission changed since its report, a report gone, a line cut short: graded again
    earlier = time.time() - 100   # s0's report older than its file: changed since
    os.utime(out / "reports" / "s0.json", (earlier, earlier))
    (out / "reports" / "s4.json").unlink()
    book.write_text("\n".join(line if not line.startswith("s5,") else "s5,19"
                              for line in book.read_text().splitlines()) + "\n")
    assert grade("--again") == 0 and graded == ["s0", "s4", "s5"]
    assert len(read(book)) == 6
    # --shard: its own submissions only; the others' rows carried as they were
    assert grade("--again", "--shard", "0/2") == 0 and graded == []
    assert [r["submission"] for r in read(book)] == [f"s{i}" for i in range(6)]
    # another selection cannot go on from this batch: it says so and grades nothing
    capsys.readouterr()
    assert grade("--again", "--layers", "cpu") == 2 and graded == []
    assert "give the same --exercises, --layers" in capsys.readouterr().err
    code = b.grade_all(b.parser().parse_args(
        [str(tmp_path / "subs"), "--out", str(out), "--exercises", "io_model", "--again"]))
    assert code == 2 and graded == [] and "--again:" in capsys.readouterr().err
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []   # no temporary left


def test_each_grade_at_once_gets_a_share_of_the_cores(monkeypatch):
    """Several grades at once split the cores (each sizes its grading processes by its share,
    as a grade alone does by the machine); one grade at a time takes them all, as alone."""
    from grader import batch as b

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert b.core_shares(1) == []
    assert b.core_shares(2) == [list(range(8)), list(range(8, 16))]
    assert b.core_shares(3) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5})
    assert b.core_shares(3) == [[4], [5], [4]]


def test_the_grader_runs_on_the_cores_cpus_names(tmp_path):
    """--cpus pins the grader before it starts any process (they inherit it); a core this
    process may not use, or no core, is a one-line error."""
    from grader.options import cpu_list, cpu_text

    assert cpu_text([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert cpu_list(cpu_text(sorted(os.sched_getaffinity(0)))) == sorted(os.sched_getaffinity(0))
    (tmp_path / "sub").mkdir()
    probe = ("import os, sys; from grader import run; "
             "run.grade = lambda *a, **k: sys.exit(f'cores {sorted(os.sched_getaffinity(0))}'); "
             "from grader.cli import main; main(sys.argv[1:])")
    first = min(os.sched_getaffinity(0))
    proc = subprocess.run([sys.executable, "-c", probe, "--submission", str(tmp_path / "sub"),
                           "--quiet", "--cpus", str(first)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert f"cores [{first}]" in proc.stderr, proc.stderr
    for bad in ("4096", "x", ""):
        proc = subprocess.run([sys.executable, "-m", "grader", "--submission", str(tmp_path / "sub"),
                               "--cpus", bad], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 2 and "--cpus" in proc.stderr and "Traceback" not in proc.stderr


def test_gpus_asks_for_what_is_visible(monkeypatch):
    from grader import batch as b

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    args = b.parser().parse_args(["subs", "--gpus", "1"])
    assert b.choose_gpus(args, True) == (["3"], 1)
    args = b.parser().parse_args(["subs", "--gpus", "3"])
    assert "--gpus 3: 2 GPU(s) visible (CUDA_VISIBLE_DEVICES)" in b.choose_gpus(args, True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "0 GPU(s) visible" in b.choose_gpus(b.parser().parse_args(["subs", "--gpus", "all"]), True)
    assert b.choose_gpus(b.parser().parse_args(["subs", "--jobs", "4"]), True) == ([], 4)
    proc = batch("--gpus", "0", "subs")
    assert proc.returncode == 2 and "--gpus wants all or a count" in proc.stderr


def test_gpu_batch_class_mixes_one_case_of_each_kind_per_exercise(tmp_path):
    """tools/gpu_batch.py's class (graded by batch --gpus on a GPU box, then each alone):
    solutions, stubs, and one submission per kind with that kind's first case of each exercise
    in place; a correct variant, never a near-correct one."""
    from tools.gpu_batch import FEWER, FULL, SPEED, ZERO, make_class

    plan = make_class(tmp_path, ["softmax_triton", "flash_decode"], on_gpu=True)
    assert [plan[s]["expect"] for s in plan] == [FULL, ZERO, SPEED, FEWER, FEWER, FEWER]
    assert set(plan["d_wrong"]["cases"]) == {"softmax_triton", "flash_decode"}
    variant = plan["c_variants"]["cases"]["softmax_triton"]
    assert not (ROOT / "tests/exercises/softmax_triton/variants" / variant / "expect.json").exists()
    for sub, want in plan.items():
        for ex in want["cases"]:
            assert ((tmp_path / sub / f"{ex}.py").read_text()
                    != (ROOT / "solutions" / f"{ex}.py").read_text()), (sub, ex)


def test_gpu_batch_class_of_twenty_takes_the_next_case_of_each_kind(tmp_path):
    """--size 20: solutions, stubs, then the four kinds in turn, each submission of a kind with
    the kind's next case (so the class is 20 different submissions where the cases allow);
    --shard I/N keeps the submissions batch grades in that shard."""
    from tools.gpu_batch import case_files, class_plan, in_shard, make_class

    plan = class_plan(20)
    assert len(plan) == 20 and list(plan)[:6] == ["a_solutions", "b_stubs", "c_variants",
                                                 "d_wrong", "e_mutants", "f_cheats"]
    assert plan["c_variants_2"][1:] == ("variants", 1) and plan["f_cheats_4"][1:] == ("cheats", 3)
    names = [case_files(plan[s][1], "softmax_triton", True, plan[s][2])[0]
             for s in ("d_wrong", "d_wrong_2", "d_wrong_3")]
    assert len(set(names)) == 3 and all(names), names
    made = make_class(tmp_path, ["softmax_triton"], on_gpu=True, size=20)
    assert list(made) == list(plan)
    halves = [in_shard(made, tmp_path, (i, 2)) for i in (0, 1)]
    assert sorted([*halves[0], *halves[1]]) == sorted(plan) and len(halves[0]) == 10
    assert "a_solutions" in halves[0] and "b_stubs" in halves[1]   # batch sorts by name too


def test_gpu_batch_writes_the_batchs_summary_before_any_grade_alone(tmp_path, monkeypatch):
    """A device call's limit that stops tools/gpu_batch.py during the grades alone leaves the
    batch's rows, judged, in summary.json; each grade alone then fills its row in."""
    from tools import gpu_batch
    from tools.gpu_batch import FEWER, FULL

    out = tmp_path / "out"
    plan = {"a_solutions": {"expect": FULL, "cases": {}},
            "d_wrong": {"expect": FEWER, "cases": {"softmax_triton": "x"}}}
    monkeypatch.setattr(gpu_batch, "make_class", lambda klass, *a, **k: klass.mkdir(parents=True)
                        or plan)

    def batch(cmd, **kwargs):
        (out / "gradebook.csv").write_text("submission,softmax_triton,total,max,note\n"
                                           "a_solutions,10,10,10,\nd_wrong,4,4,10,\n")
        return subprocess.CompletedProcess(cmd, 0, "a_solutions: 10/10 (7 s, GPU 0)\n"
                                           "d_wrong: 4/10 (5 s, GPU 0)\n", "")

    monkeypatch.setattr(gpu_batch.subprocess, "run", batch)
    graded = []

    def alone(sub, path, exercises, selection):
        if graded:
            raise KeyboardInterrupt          # the call's limit, during the second grade alone
        graded.append(sub.name)
        return {"softmax_triton": 10.0, "total": 10.0, "max": 10.0}, 9.0, ""

    monkeypatch.setattr(gpu_batch, "grade_alone", alone)
    with pytest.raises(KeyboardInterrupt):
        gpu_batch.main(["--out", str(out), "--exercises", "softmax_triton", "--size", "6"])
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["submission"]: r for r in summary["rows"]}
    assert set(rows) == set(plan) and summary["submissions"] == 2
    assert rows["a_solutions"]["alone"]["total"] == 10.0 and rows["a_solutions"]["largest_difference"] == 0
    assert rows["d_wrong"]["alone"] is None and rows["d_wrong"]["batch"]["total"] == "4"
    assert not any(r["problem"] for r in rows.values()) and rows["d_wrong"]["batch_s"] == 5


def test_gpu_batch_only_batches_the_named_submissions(tmp_path, monkeypatch):
    """--only NAME,...: the class keeps only those submissions (a shard's earlier sitting left
    them without a grade alone), and batch grades that folder without --shard."""
    from tools import gpu_batch

    out, seen = tmp_path / "out", {}

    def batch(cmd, **kwargs):
        seen["cmd"], seen["class"] = cmd, sorted(p.name for p in (out / "class").iterdir())
        return subprocess.CompletedProcess(cmd, 1, "", "stopped here")

    monkeypatch.setattr(gpu_batch.subprocess, "run", batch)
    assert gpu_batch.main(["--out", str(out), "--exercises", "softmax_triton", "--size", "20",
                           "--only", "f_cheats,d_wrong_2", "--alone", "none"]) == 1
    assert seen["class"] == ["d_wrong_2", "f_cheats"] and "--shard" not in seen["cmd"]
    with pytest.raises(SystemExit, match="no submission z_none"):
        gpu_batch.main(["--out", str(tmp_path / "o2"), "--exercises", "softmax_triton",
                        "--only", "z_none"])


def test_the_grader_is_given_a_private_copy_not_the_class_folder(tmp_path, monkeypatch):
    """Every process on the machine may read a grader's command line (/proc): it names a copy
    of the submission's files inside the grade's own 0700 folder, never the class's folder
    (tests/attacks/classmate reads the other grades' command lines)."""
    import argparse
    import stat

    from grader import batch as b

    sub = copy_solutions(tmp_path / "subs" / "alice")
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    seen = {}

    def fake_run(cmd, **kw):
        given = Path(cmd[cmd.index("--submission") + 1])
        seen.update(given=given, files=sorted(p.name for p in given.iterdir()),
                    private=stat.S_IMODE(given.parents[1].stat().st_mode))
        return subprocess.CompletedProcess(cmd, 1, "", "stopped here")

    monkeypatch.setattr(b.subprocess, "run", fake_run)
    args = argparse.Namespace(sandbox=True, layers=None, no_hidden=False, timeout=60)
    row = b.grade_one(sub, out, args, list(EXS), None)
    assert "grading failed" in row["note"]
    assert seen["given"].name == "alice" and sub.resolve() not in seen["given"].parents
    assert seen["given"] != sub.resolve() and seen["private"] == 0o700
    assert seen["files"] == sorted(f"{e}.py" for e in b.EXERCISES if (sub / f"{e}.py").exists())
    assert not seen["given"].exists()   # removed with the grade's folder
