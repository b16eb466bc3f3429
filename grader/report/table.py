"""The score table every report starts with: one row per exercise, one column per layer, the
exercise's public total, and its hidden checks apart where they ran."""

from __future__ import annotations

from grader.registry import LAYERS
from grader.report.summary import exercises_shown, fmt, selected
from grader.results import GradeReport


def layers_shown(report: GradeReport) -> list[str]:
    have = {r.check.layer for r in selected(report)}
    return [l for l in LAYERS if l in have]


def rows(report: GradeReport) -> list[list[str]]:
    """Exercise, then score/max per layer ("not run" for a layer that did not run), then the
    total: public checks only, the points README gives each exercise. Where hidden checks ran
    (hidden_tests/ present), a last column holds theirs, every layer together."""
    out = []
    rs = selected(report)
    hidden = any(r.check.hidden for r in rs)
    for ex in exercises_shown(report):
        mine = [r for r in rs if r.check.exercise == ex]
        public = [r for r in mine if not r.check.hidden]
        cells = [ex]
        for layer in layers_shown(report):
            cells.append(_cell([r for r in public if r.check.layer == layer]))
        ran = [r for r in public if r.status != "not_run"]
        cells.append(f"{fmt(sum(r.score for r in ran))}/{fmt(sum(r.max_score for r in ran))}")
        if hidden:
            cells.append(_cell([r for r in mine if r.check.hidden]))
        out.append(cells)
    return out


def _cell(results: list) -> str:
    """score/max of these results, "not run" when none ran, "" when there are none."""
    if not results:
        return ""
    if all(r.status == "not_run" for r in results):
        return "not run"
    return f"{fmt(sum(r.score for r in results))}/{fmt(sum(r.max_score for r in results))}"


def header(report: GradeReport) -> list[str]:
    hidden = any(r.check.hidden for r in selected(report))
    return ["exercise", *layers_shown(report), "total", *(["hidden"] if hidden else [])]
