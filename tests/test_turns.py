"""The perf processes' turns on the GPU (grader/judge/turns.py): shared turns overlap, a turn
alone overlaps none, and a process waiting to be alone is not starved by shared ones."""

from __future__ import annotations

import multiprocessing as mp
import time

from grader.judge import turns


def _hold(folder, mode, seconds, log, start):
    turns.join(folder)
    start.wait()
    if mode == "alone":
        time.sleep(0.2)   # the shared turns are taken first
    with turns.shared():
        if mode == "alone":
            with turns.alone():
                log.put(("in", mode, time.monotonic()))
                time.sleep(seconds)
                log.put(("out", mode, time.monotonic()))
        else:
            log.put(("in", mode, time.monotonic()))
            time.sleep(seconds)
            log.put(("out", mode, time.monotonic()))


def test_without_a_folder_nothing_waits():
    turns.join(None)
    assert not turns.active()
    with turns.shared(), turns.alone(), turns.shared():
        pass


def test_alone_overlaps_no_one_and_shared_turns_overlap(tmp_path):
    ctx = mp.get_context("fork")
    log, start = ctx.Queue(), ctx.Event()
    jobs = [ctx.Process(target=_hold, args=(str(tmp_path), m, s, log, start))
            for m, s in (("shared", 0.6), ("shared", 0.6), ("alone", 0.3), ("alone", 0.3))]
    for j in jobs:
        j.start()
    start.set()
    for j in jobs:
        j.join(30)
        assert j.exitcode == 0
    events = sorted((log.get(timeout=5) for _ in range(8)), key=lambda e: e[2])
    inside = {"shared": 0, "alone": 0}
    most_shared = 0
    for kind, mode, _ in events:
        inside[mode] += 1 if kind == "in" else -1
        assert inside["alone"] <= 1
        if inside["alone"]:
            assert inside["shared"] == 0, events
        most_shared = max(most_shared, inside["shared"])
    assert most_shared == 2, events


def test_turns_nest_and_come_back(tmp_path):
    turns.join(str(tmp_path))
    try:
        with turns.shared():
            assert turns._state["mode"] == "shared"
            with turns.alone():
                assert turns._state["mode"] == "alone"
                with turns.alone(), turns.shared():
                    assert turns._state["mode"] == "alone"
            assert turns._state["mode"] == "shared"
        assert turns._state["mode"] is None
    finally:
        turns.join(None)


def test_the_folder_goes_with_the_run():
    with turns.for_run() as folder:
        turns.join(str(folder))
        with turns.alone():
            pass
        turns.join(None)
        assert (folder.stat().st_mode & 0o077) == 0   # only the grader opens it
    assert not folder.exists()
    with turns.for_run(False) as none:
        assert none is None
