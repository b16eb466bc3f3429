"""One grading run's Triton cache (grader/sandbox/kernel_cache.py): the CUDA workers that import
the submission share one folder, the replay workers another, which at the `os` level no worker
of the student's Python can reach; without a run, and in the modes that compile nothing, each
worker keeps its own."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from grader.sandbox import kernel_cache
from grader.sandbox.proxy import Submission

PROBE = """import os

def softmax_safe(x):
    folder = os.environ["TRITON_CACHE_DIR"]
    os.makedirs(folder, exist_ok=True)
    mark = os.path.join(folder, "mark")
    seen = os.path.exists(mark)
    with open(mark, "w") as f:
        f.write("planted")
    return {"folder": folder, "seen": seen, "reach": [os.path.exists(p) for p in x]}
"""


def _level(name: str):
    return types.SimpleNamespace(name=name, as_student=False, uid=0, gid=0)


def test_folders_by_kind_mode_and_level():
    assert kernel_cache.folder_for("student", "cuda", _level("os")) is None   # no run open
    with kernel_cache.for_run() as run:
        assert kernel_cache.current() == str(run)
        assert kernel_cache.folder_for("student", "cuda", _level("os")) == run / "student"
        assert kernel_cache.folder_for("replay", "cuda", _level("os")) == run / "replay"
        assert kernel_cache.folder_for("replay", "cuda", _level("process")) == run / "replay"
        # the student's uid could write a shared replay folder at the user level
        assert kernel_cache.folder_for("replay", "cuda", _level("user")) is None
        assert kernel_cache.folder_for("student", "cuda", _level("user")) == run / "student"
        for mode in ("cpu", "interp"):   # nothing compiled there
            assert kernel_cache.folder_for("student", mode, _level("os")) is None
        with pytest.raises(ValueError):
            kernel_cache.folder_for("mine", "cuda", _level("os"))
        with kernel_cache.for_run(str(run)):   # a part of the grade: the same folder, kept
            assert kernel_cache.current() == str(run)
        assert run.is_dir()
    assert not run.exists() and kernel_cache.current() == ""


def test_workers_share_the_students_cache_and_never_the_replays(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").write_text(PROBE)
    with kernel_cache.for_run() as run:
        replay_host = str(run / "replay")
        workers = [Submission("online_softmax", sub, "cuda", tmp_path / f"w{i}") for i in range(2)]
        replayer = Submission("online_softmax", sub, "cuda", tmp_path / "r", cache="replay")
        try:
            first, second = (w.softmax_safe([replay_host]) for w in workers)
            replayed = replayer.softmax_safe([])
        finally:
            for w in (*workers, replayer):
                w.close()
        level = workers[0].level.name
        assert not first["seen"] and second["seen"], (first, second)   # one student folder
        assert first["folder"] == second["folder"]
        assert not replayed["seen"], replayed        # the replay's is another
        assert (run / "replay" / "mark").is_file() == (level != "user")
        if level == "os":   # bound into the replay workers' namespaces alone
            assert first["reach"] == [False] and second["reach"] == [False]
            assert first["folder"] == replayed["folder"] == "/sandbox/kernels"
        assert Path(run / "student" / "mark").read_text() == "planted"
    assert not os.path.exists(run)
