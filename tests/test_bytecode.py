"""One grading run's bytecode of the libraries workers import (grader/sandbox/bytecode.py): built
only where torch ships none, read by workers that run under a uid of their own, and written by
none of them."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

from grader.sandbox import bytecode, confine
from grader.sandbox.proxy import Submission
from tests.helpers import set_options

PROBE = """import os, sys

def softmax_safe(x):
    prefix = sys.pycache_prefix
    planted = False
    if prefix:
        try:
            with open(os.path.join(prefix, "planted.pyc"), "wb") as f:
                f.write(b"x")
            planted = True
        except OSError:
            pass
    return {"prefix": prefix, "planted": planted}
"""


def _level(as_student: bool):
    return types.SimpleNamespace(name="os", as_student=as_student, uid=0, gid=0)


def test_needed_follows_the_switch_and_torch(monkeypatch):
    set_options(monkeypatch, bytecode=True)
    assert bytecode.needed()
    set_options(monkeypatch, bytecode=False)
    assert not bytecode.needed()
    set_options(monkeypatch, bytecode=None)
    # this machine's torch has its bytecode beside it (pip wrote it): nothing to build
    assert not bytecode.needed()


def test_folders_by_run_and_level(monkeypatch, tmp_path):
    set_options(monkeypatch, bytecode=False)
    with bytecode.for_run() as none:
        assert none is None and bytecode.current() == ""
    with bytecode.for_run(""):               # a part of a grade that has none
        assert bytecode.current() == ""
    with bytecode.for_run(str(tmp_path)) as kept:   # a part of a grade that has one
        assert kept == tmp_path and bytecode.current() == str(tmp_path)
        assert bytecode.folder_for(_level(True)) == tmp_path
        assert bytecode.folder_for(_level(False)) is None   # the grader's own uid could write it
    assert tmp_path.is_dir() and bytecode.folder_for(_level(True)) is None


def test_the_build_writes_bytecode_and_the_folder_goes_with_the_run(monkeypatch):
    set_options(monkeypatch, bytecode=True)
    monkeypatch.setattr(bytecode, "BUILD", "import os\nos.umask(0o022)\nimport json.decoder\n")
    with bytecode.for_run() as run:
        assert (run.stat().st_mode & 0o777) == 0o755
        deadline = time.monotonic() + 60
        while not list(run.rglob("decoder*.pyc")) and time.monotonic() < deadline:
            time.sleep(0.1)
        built = list(run.rglob("decoder*.pyc"))
        assert built, sorted(run.rglob("*"))
        assert (built[0].stat().st_mode & 0o022) == 0   # the grader's: no other uid writes it
    assert not run.exists()


def test_workers_read_the_folder_and_cannot_write_it(monkeypatch, tmp_path):
    set_options(monkeypatch, bytecode=True)
    monkeypatch.setattr(bytecode, "BUILD", "pass\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").write_text(PROBE)
    with bytecode.for_run() as run:
        worker = Submission("online_softmax", sub, "cpu", tmp_path / "w")
        try:
            got = worker.softmax_safe([])
        finally:
            worker.close()
        level = worker.level
    if not level.as_student:    # the student's code runs as the grader's uid: no folder there
        assert got["prefix"] is None
        return
    assert got["prefix"] == (confine.INSIDE_PYCACHE if level.name == "os" else str(run))
    assert not got["planted"] and not os.path.exists(Path(run) / "planted.pyc")
