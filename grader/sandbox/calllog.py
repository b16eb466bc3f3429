"""A timeline of the proxy's round trips, for the cost model in docs/INSTRUCTORS.md.

    make grade-gpu IMPL=solutions ARGS="--call-log /tmp/calls.jsonl"
    python3 -m tools.call_costs /tmp/calls.jsonl

One JSON line per worker start, call and replay: when it ended, how long it took, which
exercise, mode and function, the keys of the call's options (`runs`, `trace`, ...) and the
check that was running (grader.plugin sets `check`). Off unless the option call_log names a
file (--call-log); lines are appended whole, so grading processes can share it.
"""

from __future__ import annotations

import json
import os
import threading
import time

from grader import options

check = ""   # the id of the check this process is running
# the check a thread settles, where checks are settled side by side (grader.plugin)
this_thread = threading.local()


def record(event: str, exercise: str, mode: str, seconds: float, **fields) -> None:
    path = options.current().call_log
    if not path:
        return
    line = json.dumps({"end": round(time.time(), 4), "s": round(seconds, 4), "event": event,
                       "exercise": exercise, "mode": mode, "pid": os.getpid(),
                       "check": getattr(this_thread, "check", "") or check, **fields})
    with open(path, "a") as f:
        f.write(line + "\n")


class span:
    """`with calllog.span("verify", exercise):` records the trusted side's own work too."""

    def __init__(self, event: str, exercise: str = "", **fields):
        self.event, self.exercise, self.fields = event, exercise, fields

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        record(self.event, self.exercise, "trusted", time.perf_counter() - self.start, **self.fields)
        return False
