"""Corpus cases graded several to one grade: up to PACK_SIZE honest cases (mutants, variants,
wrong work), each of a different exercise, put in one copy of solutions/ and graded together,
each test reading its own exercise's part of the report (`own_part`).

Why: a grade's fixed cost is the grader's start and, with the provenance replay, the front-end
worker that every exercise of a run shares (grader.judge.evidence.provenance), together about 3 s of CPU;
a pack pays them once. Why it changes no verdict: every exercise of a run is graded by its own
workers, from its own file, with its own seeds, and the report groups failures within an
exercise (grader/report/summary.py). Only honest work is packed: a cheat could aim at the shared
front-end worker and so at a neighbour's verdict (tests/test_cheats.py grades each alone).
An exercise is never packed beside one it imports (APART: bench_attn's sweep imports
flash_triton), and a case of several exercises is graded alone.

    PACKS = Packs(cases, name=..., exercise=..., files=..., layers=..., hidden=..., replay=...,
                  checks=...)     # checks: case -> the check ids to grade, where not all of them
    report = PACKS.report(case, request, "case")    # that case's part of its pack's grade

Under pytest-xdist (`make test`) the tests of one pack run in one process (tests.conftest asks
`scope`), the first of them grades the pack and the others read it. In a serial run the packs
of the selected tests are graded ahead, two at a time (a grade uses about one core, CI has two).
Only the selected cases of a pack are graded (`-k` one case grades that case alone).
"""

from __future__ import annotations

import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.helpers import copy_solutions, grade

PACK_SIZE = 4
APART = {"bench_attn": {"flash_triton"}}   # its sweep imports flash_triton: never beside a case of that


def own_part(report: dict, exercise: str) -> dict:
    """The report as if only `exercise` had been graded: its checks, the failure groups it
    leads, its score."""
    tests = [t for t in report["tests"] if t["exercise"] == exercise]
    mine = {t["name"] for t in tests}
    return {**report, "tests": tests,
            "failures": [g for g in report.get("failures", []) if g["lead"] in mine],
            "score": round(sum(t["score"] for t in tests), 6),
            "max_score": round(sum(t["max_score"] for t in tests), 6)}


def pack(cases, *, exercise, key, packable=lambda case: True, size: int = PACK_SIZE) -> list[list]:
    """The cases in packs: up to `size` cases of different exercises each, among cases of the
    same `key(case)` (graded the same way), the exercises with the most cases left first, none
    beside an exercise it is APART from; a case that is not `packable` in a pack of its own."""
    packs, classes = [], {}
    for case in cases:
        if packable(case):
            classes.setdefault(key(case), {}).setdefault(exercise(case), []).append(case)
        else:
            packs.append([case])
    for by_exercise in classes.values():
        while any(by_exercise.values()):
            chosen = []
            for e in sorted((e for e in by_exercise if by_exercise[e]),
                            key=lambda e: -len(by_exercise[e])):
                if len(chosen) < size and not any(_apart(e, c) for c in chosen):
                    chosen.append(e)
            packs.append([by_exercise[e].pop(0) for e in chosen])
    return packs


def _apart(a: str, b: str) -> bool:
    return b in APART.get(a, ()) or a in APART.get(b, ())


class Packs:
    def __init__(self, cases, *, name, exercise, files, layers, hidden: bool = True,
                 replay: bool = True, packable=lambda case: True, workers: int = 2, checks=None):
        self.name, self.exercise, self.files, self.layers = name, exercise, files, layers
        self.checks = checks
        self.hidden, self.replay, self.workers = hidden, replay, workers
        self.packs = pack(cases, exercise=exercise, key=layers, packable=packable)
        self.pack_of = {name(c): i for i, pack in enumerate(self.packs) for c in pack}
        self._lock = threading.Lock()
        self._graded: dict[int, object] = {}     # pack -> Future, or the report
        self._pool = None

    def scope(self, case_name: str) -> str | None:
        """The xdist scope of a case's test: its pack's, where it shares one."""
        i = self.pack_of.get(case_name)
        return None if i is None or len(self.packs[i]) == 1 else f"pack-{i}"

    def report(self, case, request, argname: str) -> dict:
        selected = self._selected(request, argname)
        i = self.pack_of[self.name(case)]
        with self._lock:
            if self._pool is None and not os.environ.get("PYTEST_XDIST_WORKER"):
                self._start_ahead(selected)
            got = self._graded.get(i)
        if got is None:
            got = self._grade(i, selected)
            with self._lock:
                self._graded[i] = got
        if not isinstance(got, dict):
            got = got.result()
        return own_part(got, self.exercise(case))

    def _selected(self, request, argname: str) -> set:
        name = request.node.originalname
        return {self.name(item.callspec.params[argname]) for item in request.session.items
                if getattr(item, "originalname", None) == name and hasattr(item, "callspec")}

    def _start_ahead(self, selected: set) -> None:
        self._pool = ThreadPoolExecutor(self.workers)
        for i, pack in enumerate(self.packs):
            if any(self.name(c) in selected for c in pack):
                self._graded[i] = self._pool.submit(self._grade, i, selected)
        self._pool.shutdown(wait=False)

    def _grade(self, i: int, selected: set) -> dict:
        members = [c for c in self.packs[i] if self.name(c) in selected]
        files = {}
        for case in members:
            files.update(self.files(case))
        args = ["--exercises", ",".join(self.exercise(c) for c in members),
                "--layers", self.layers(members[0])]
        if not self.hidden:
            args.append("--no-hidden")
        if self.checks is not None:
            args += ["--checks", ",".join(c for case in members for c in self.checks(case))]
        with tempfile.TemporaryDirectory(prefix="pack-") as tmp:
            sub = copy_solutions(Path(tmp) / "sub", files)
            # one process: the pack is one core's work under xdist (grader.parallel would start more)
            return grade(sub, *args, replay=self.replay, env={"GRADER_JOBS": "1"},
                         json_path=Path(tmp) / "report.json")
