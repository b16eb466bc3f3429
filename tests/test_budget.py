"""Where memory allows one worker at a time (Gradescope's default 768 MB: the grader holds about
400 MB with torch loaded, a worker about 240 MB), starting a worker stops every other, and the
stopped one starts again, with its module imported afresh, when it is next used."""

from __future__ import annotations

import numpy as np

from grader.sandbox import budget, proxy
from tests.helpers import SOLUTIONS, set_options


def test_one_worker_at_a_time_below_the_threshold(tmp_path, monkeypatch):
    set_options(monkeypatch, memory_mb=768)
    budget.memory_bytes.cache_clear()
    try:
        assert budget.one_worker_at_a_time() and budget.one_exercise_at_a_time()
        x = np.random.default_rng().standard_normal((3, 5)).astype(np.float32)
        first = proxy.Submission("online_softmax", SOLUTIONS, "cpu", tmp_path / "a")
        second = proxy.Submission("online_softmax", SOLUTIONS, "cpu", tmp_path / "b")
        try:
            first.call("softmax_safe", x)
            pid = first.worker_pid
            second.call("softmax_safe", x)
            assert first._worker is None, "the first worker was not stopped"
            value = first.call("softmax_safe", x).value    # started again
            assert first.worker_pid != pid and value is not None
            assert second._worker is None
        finally:
            first.close()
            second.close()
    finally:
        monkeypatch.undo()
        budget.memory_bytes.cache_clear()


def test_enough_memory_keeps_workers(monkeypatch):
    set_options(monkeypatch, memory_mb=2048)
    budget.memory_bytes.cache_clear()
    try:
        assert not budget.one_worker_at_a_time() and budget.one_exercise_at_a_time()
    finally:
        monkeypatch.undo()
        budget.memory_bytes.cache_clear()
