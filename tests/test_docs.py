"""The numbers the docs give an instructor are the registry's: the points table of
docs/INSTRUCTORS.md, the Gradescope totals it recommends, and the README's points per exercise."""

from __future__ import annotations

import re

from grader.registry import EXERCISES, all_checks
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
