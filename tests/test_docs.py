"""The numbers the docs give are the registry's: the points table of docs/INSTRUCTORS.md, the
Gradescope totals it recommends, and the README's points per exercise and total lines (issue 52:
one story about points, whatever checkout shows them)."""

from __future__ import annotations

import re

from grader.registry import EXERCISES, all_checks
from grader.report import summary
from grader.results import NOT_SELECTED, GradeReport, Result
from tests.helpers import ROOT

GPU_LAYERS = ("gpu", "perf")


def points() -> dict:
    """{(track, column): points}, column one of public_cpu, public_gpu, hidden."""
    out: dict = {}
    for c in all_checks().values():
        column = "hidden" if c.hidden else ("public_gpu" if c.layer in GPU_LAYERS else "public_cpu")
        key = (EXERCISES[c.exercise].track, column)
        out[key] = out.get(key, 0) + c.points
    return out


def test_the_instructors_points_table_is_the_registrys():
    text = (ROOT / "docs" / "INSTRUCTORS.md").read_text()
    table = text.split("<!-- totals")[1].split("<!-- /totals -->")[0]
    rows = re.findall(r"^\| (core|extension) \| (\d+) \| (\d+) \| (\d+) \|$", table, re.M)
    assert {r[0] for r in rows} == {e.track for e in EXERCISES.values()}, table
    want = points()
    for track, cpu, gpu, hidden in rows:
        got = (float(cpu), float(gpu), float(hidden))
        assert got == tuple(want.get((track, k), 0) for k in ("public_cpu", "public_gpu", "hidden")), track
    # the Gradescope totals it recommends: what runs there (no GPU), hidden included
    core = want[("core", "public_cpu")] + want[("core", "hidden")]
    everything = core + want[("extension", "public_cpu")] + want[("extension", "hidden")]
    assert f"**Total points: {core:g}**" in text and f"**{everything:g}**" in text


def test_the_readme_gives_each_core_exercise_its_points():
    text = (ROOT / "README.md").read_text()
    for name, e in EXERCISES.items():
        total = sum(c.points for c in all_checks(include_hidden=False).values() if c.exercise == name)
        if e.track == "core":
            assert f"{name} {total:g}" in text, name
        else:
            assert f"{name}.py` (" in text and f"{total:g} points" in text, name


def _readme() -> str:
    """README.md with its lines joined, as a reader reads its sentences."""
    return re.sub(r"\s+", " ", (ROOT / "README.md").read_text())


def _stub_report(only: str | None = None, hidden: bool = False) -> GradeReport:
    """`make grade` of the stubs on a machine without a GPU (of one exercise: `make check`)."""
    results = []
    for c in all_checks(include_hidden=hidden).values():
        if only and c.exercise != only:
            results.append(Result(c, "not_run", 0.0, NOT_SELECTED))
        elif c.layer in GPU_LAYERS:
            results.append(Result(c, "not_run", 0.0, "not selected"))
        else:
            results.append(Result(c, "not_implemented", 0.0, "TODO"))
    return GradeReport("exercises", "CPU only", results, 1.0, ["cpu", "adversarial", "interp"],
                       {"gpu": "not selected", "perf": "not selected"}, {}, [], {})


def test_the_readme_points_sentence_is_the_registrys():
    """"The lab has 100 points: online_softmax 16, ...": each core exercise's public points in
    the lesson's order, and how many run on any machine."""
    public = all_checks(include_hidden=False).values()
    core = [name for name, e in EXERCISES.items() if e.track == "core"]
    each = {name: sum(c.points for c in public if c.exercise == name) for name in core}
    gpu = sum(c.points for c in public if c.exercise in core and c.layer in GPU_LAYERS)
    total = sum(each.values())
    sentence = (f"The lab has {total:g} points: " + ", ".join(f"{n} {p:g}" for n, p in each.items())
                + f". {total - gpu:g} of them run on any machine; {gpu:g} need a CUDA GPU.")
    assert sentence in _readme()


def test_the_readme_quotes_the_total_lines_the_grader_prints():
    """The total lines README gives as examples are summary.total_line's, numbers and all."""
    text = _readme()
    line = summary.total_line(_stub_report())
    assert line.startswith("Total: core 0 / ")
    assert line.replace("core 0 /", "core 40 /", 1) in text, line
    check = summary.total_line(_stub_report(only="online_softmax")).replace("0 / ", "16 / ", 1)
    assert check.split("machine;")[0] + "machine; ..." in text, check


def test_hidden_checks_count_apart_as_readme_says():
    """Where hidden checks run (hidden_tests/ present), the total line and the table keep them
    apart: the public totals are README's, and the hidden ones are named as such."""
    if not any(c.hidden for c in all_checks().values()):
        return   # the student release: no hidden checks to count
    from grader.report import table

    rep = _stub_report(hidden=True)
    public = summary.total_line(_stub_report())
    line = summary.total_line(rep)
    hidden = sum(c.points for c in all_checks().values() if c.hidden and c.layer not in GPU_LAYERS)
    assert line == public.replace("hidden checks only in instructors' runs",
                                  f"hidden 0 / {hidden:g} (instructors' checks, run here because "
                                  f"hidden_tests/ is present)")
    assert "hidden" in _readme() and "(instructors' checks, ...)" in _readme()
    header, rows = table.header(rep), {r[0]: r for r in table.rows(rep)}
    assert header[-2:] == ["total", "hidden"]
    for name in (n for n, e in EXERCISES.items() if e.track == "core"):
        cpu = sum(c.points for c in all_checks(include_hidden=False).values()
                  if c.exercise == name and c.layer not in GPU_LAYERS)
        assert rows[name][-2] == f"0/{cpu:g}", rows[name]
