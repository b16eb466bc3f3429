"""The CPU layers of several exercises at once: one grading process per CPU core.

A grade is a pytest session in one trusted process (grader.run), and most of its time is spent
waiting on one worker at a time: the interpreter running a Triton kernel, a worker importing
torch. On a laptop's cores the exercises can go side by side. `grade_cpu_layers` starts `jobs`
grading processes (`python -I grader/parallel_part.py`, the same grader, trusted like this one), hands
each an exercise as soon as it is free, longest first, and gathers their results. Each grades
its exercise with the ordinary `grader.run.grade`: its own workers, its own sandbox, the same
checks; student code still runs only in workers. Timed work is never split: the perf layer, and
every gpu check that needs the GPU to itself (Check.gpu_alone), run in grader.run's process
after these, with the GPU alone. On a CUDA machine with cores to spare the rest of the gpu layer
(correctness and compute-sanitizer, nothing timed) goes to these processes too (`split_plan`):
its time is mostly Triton compiling, which spreads over the cores.

The protocol (grader/parallel_part.py answers it) is JSON lines: a request {"exercise", "submission", "layers", "include_hidden",
"only_checks", "target", "kernels", "compiled", "options"} on the child's stdin (options: this
grade's grader.options.Options, as a dict, with one grading process: the child's only channel
for settings); {"progress": check_id} lines, then one
{"results": {...}} line, on its stdout. What else the child prints goes to its stderr, which is
read only when it dies.
"""

from __future__ import annotations

import dataclasses

import json
import os
import selectors
import subprocess
import sys
import threading
from pathlib import Path

from grader import options
from grader.registry import ROOT, Check
from grader.results import Result
from grader.sandbox import bytecode, kernel_cache
from grader.schedule import queue_for
from grader.wire.threads import ONE_THREAD


class Gathered:
    """What grading processes sent back, gathered: results by check id, seconds per layer
    (summed), notes, and {"isolation", "seccomp": {mode: level}, "device_info"}."""

    def __init__(self):
        self.results: dict[str, Result] = {}
        self.seconds: dict[str, float] = {}
        self.notes: list[str] = []
        self.levels = {"isolation": "", "seccomp": {}, "device_info": {}}

    def add(self, results: dict, seconds: dict, notes: list, isolation: str = "",
            seccomp: dict | None = None, device_info: dict | None = None) -> None:
        self.results.update(results)
        for layer, s in seconds.items():
            self.seconds[layer] = round(self.seconds.get(layer, 0.0) + float(s), 2)
        self.notes.extend(notes)
        self.levels["isolation"] = self.levels["isolation"] or isolation
        self.levels["seccomp"].update(seccomp or {})
        self.levels["device_info"] = self.levels["device_info"] or device_info or {}

    def as_tuple(self) -> tuple[dict[str, Result], dict[str, float], list[str], dict]:
        return self.results, self.seconds, self.notes, self.levels


def merge(parts: list[tuple]) -> tuple[dict[str, Result], dict[str, float], list[str], dict]:
    """The returns of several grade_cpu_layers as one."""
    gathered = Gathered()
    for results, seconds, notes, levels in parts:
        gathered.add(results, seconds, notes, levels.get("isolation", ""),
                     levels.get("seccomp"), levels.get("device_info"))
    return gathered.as_tuple()


class Background:
    """`fn()` run now (`run`) or in a thread (`start`); `result()` returns its value or raises
    its exception."""

    def __init__(self, fn):
        self.fn, self.started = fn, False
        self._value, self._error, self._thread = None, None, None

    def _call(self) -> None:
        try:
            self._value = self.fn()
        except BaseException as e:   # noqa: BLE001 - re-raised in result(), in the caller's thread
            self._error = e

    def run(self) -> None:
        self._call()

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self._thread = threading.Thread(target=self._call, name="grading-processes", daemon=True)
        self._thread.start()

    def result(self):
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def grade_cpu_layers(submission: Path, plan: dict[str, list[str]], jobs: int,
                     checks: dict[str, Check], include_hidden: bool, only_checks, target,
                     progress=None, by_layer: bool = False
                     ) -> tuple[dict[str, Result], dict[str, float], list[str], dict]:
    """Grade each exercise's layers of `plan` (split_plan) in `jobs` processes: an exercise's
    CPU layers in one request (its workers started once), or, `by_layer`, one request per
    layer (where cores are many, the heaviest exercise's layers in parallel); each gpu check
    in a request of its own. Returns the results of those checks by id, the seconds per layer
    (summed over the processes), notes, and {"isolation": the level the workers ran at,
    "seccomp": {mode: what the kernel denied them}, "device_info": the GPU's details, where a
    gpu check ran}."""
    mine = [c for c in checks.values() if c.layer in plan.get(c.exercise, ())
            and (not only_checks or c.id in only_checks)]
    queue = queue_for(plan, mine, by_layer)
    total, done = len(mine), [0]
    gathered = Gathered()
    # it grades one exercise: no grading processes of its own
    one_process = options.current().replace(jobs=1).as_dict()

    def request(child: _Child) -> None:
        exercise, layers, ids = queue.pop(0)
        child.send({"exercise": exercise, "submission": str(submission), "layers": layers,
                    "include_hidden": include_hidden, "only_checks": ids or only_checks,
                    "target": target, "kernels": kernel_cache.current(),
                    "compiled": bytecode.current(), "options": one_process})

    def finished(child: _Child, reply: dict) -> None:
        results = {}
        for cid, fields in reply["results"].items():
            check = checks.get(cid)
            if (check is not None and check.exercise == child.exercise
                    and check.layer in child.layers and child.grades(cid)):
                results[cid] = result_from(check, fields)
        gathered.add(results, reply.get("layer_seconds", {}), reply.get("notes", []),
                     reply.get("isolation", ""), parse_levels(reply.get("seccomp", "")),
                     reply.get("device_info"))

    children = [_Child() for _ in range(min(jobs, len(queue)))]
    sel = selectors.DefaultSelector()
    for child in children:
        request(child)
        sel.register(child.proc.stdout, selectors.EVENT_READ, child)
    busy = len(children)
    try:
        while busy:
            for key, _ in sel.select():
                child = key.data
                line = child.proc.stdout.readline()
                if not line:   # the grading process died: its exercise is the grader's failure
                    sel.unregister(child.proc.stdout)
                    busy -= 1
                    _lost(child, checks, child.layers, gathered.results, child.stderr_tail())
                    continue
                msg = json.loads(line)
                if "progress" in msg:
                    done[0] += 1
                    if progress is not None and msg["progress"] in checks:
                        progress(checks[msg["progress"]], done[0] - 1, total)
                    continue
                finished(child, msg)
                if queue:
                    request(child)
                else:
                    sel.unregister(child.proc.stdout)
                    busy -= 1
                    child.release()   # it exits while the others work
    finally:
        for child in children:   # all told first: their exits (a second each with CUDA) overlap
            child.release()
        for child in children:
            child.stop()
    return gathered.as_tuple()


def parse_levels(line: str) -> dict[str, str]:
    """{mode: level} from a report's seccomp line ("cpu: processes+threads; interp: ...")."""
    pairs = (part.split(":", 1) for part in str(line or "").split("; ") if ":" in part)
    return {mode.strip(): level.strip() for mode, level in pairs}


def join_levels(levels: dict[str, str]) -> str:
    return "; ".join(f"{mode}: {level}" for mode, level in sorted(levels.items()))


def result_to_dict(r: Result) -> dict:
    """A Result as JSON, every field but the check (the registry has it)."""
    return {f.name: getattr(r, f.name) for f in dataclasses.fields(Result) if f.name != "check"}


def result_from(check: Check, d: dict) -> Result:
    names = {f.name for f in dataclasses.fields(Result)} - {"check"}
    fields = {k: v for k, v in d.items() if k in names}
    if fields.get("failure_follows") is not None:
        fields["failure_follows"] = tuple(fields["failure_follows"])
    return Result(check, **fields)


def _lost(child: "_Child", checks, layers, results, why: str) -> None:
    for c in checks.values():
        if (c.exercise == child.exercise and c.layer in layers and child.grades(c.id)
                and c.id not in results):
            results[c.id] = Result(c, "error", 0.0, f"grader error (the grading process for "
                                   f"{child.exercise} stopped: {why or 'no output'}); this is not "
                                   f"your code's fault: please report it to the course staff",
                                   grader_error=True)


class _Child:
    """One grading process (grader/parallel_part.py), fed one exercise at a time."""

    def __init__(self):
        # one thread for its NumPy, BLAS and torch CPU work (the references), like its workers;
        # its settings come in each request (grader.options), not from here
        env = dict(os.environ, **ONE_THREAD)
        self.stderr_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"grader-part-{os.getpid()}-{id(self)}.log"
        self._stderr = open(self.stderr_path, "w+b")
        self.proc = subprocess.Popen([sys.executable, "-I", "-B", str(ROOT / "grader" / "parallel_part.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env, text=True, bufsize=1)
        self.exercise, self.layers, self.only = "", [], None

    def send(self, request: dict) -> None:
        self.exercise, self.layers = request["exercise"], request["layers"]
        self.only = request["only_checks"]
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError:   # it died before reading it (BrokenPipeError): its stdout's end says
            pass          # so, and its exercise becomes the grader's failure there (_lost)

    def grades(self, check_id: str) -> bool:
        """Whether the request in hand grades this check."""
        return not self.only or check_id in self.only

    def stderr_tail(self) -> str:
        self.proc.wait(timeout=30)
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip()
        return f"exit {self.proc.returncode}; " + text[-400:]

    def release(self) -> None:
        """No more requests: it ends once its exercise's workers have stopped."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self) -> None:
        self.release()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()
        self.stderr_path.unlink(missing_ok=True)
