"""The score table every report starts with: one row per exercise, one column per layer."""

from __future__ import annotations

from grader.registry import LAYERS
from grader.report.summary import exercises_shown, fmt, selected
from grader.results import GradeReport


def layers_shown(report: GradeReport) -> list[str]:
    have = {r.check.layer for r in selected(report)}
    return [l for l in LAYERS if l in have]


def rows(report: GradeReport) -> list[list[str]]:
    """Exercise, then score/max per layer ("not run" for a layer that did not run), then total."""
    out = []
    rs = selected(report)
    for ex in exercises_shown(report):
        cells, total, top = [ex], 0.0, 0.0
        for layer in layers_shown(report):
            here = [r for r in rs if r.check.exercise == ex and r.check.layer == layer]
            if not here:
                cells.append("")
            elif all(r.status == "not_run" for r in here):
                cells.append("not run")
            else:
                s, m = sum(r.score for r in here), sum(r.max_score for r in here)
                total, top = total + s, top + m
                cells.append(f"{fmt(s)}/{fmt(m)}")
        cells.append(f"{fmt(total)}/{fmt(top)}")
        out.append(cells)
    return out


def header(report: GradeReport) -> list[str]:
    return ["exercise", *layers_shown(report), "total"]
