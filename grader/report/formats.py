"""The machine-read reports: the JSON report and Gradescope's results.json."""

from __future__ import annotations

import dataclasses

from grader.registry import EXERCISES
from grader.report import page, pictures, summary
from grader.report.summary import clean, output_of
from grader.results import GradeReport

# Gradescope's public line: hidden checks count in the score, but their points and the total
# show only after publication (their tests are after_published)
HIDDEN_ON_GRADESCOPE = "hidden checks are graded too and shown when grades are published"


def to_json(report: GradeReport) -> dict:
    return {
        "score": report.score,
        "max_score": report.max_score,
        "summary": summary.total_line(report),
        "totals": summary.totals(report),
        "submission": report.submission,
        "device": report.device,
        "target": summary.target_of(report) or None,   # grader.judge.machine.target: advice, not points
        "isolation": summary.isolation(report),
        "seccomp": summary.seccomp(report),
        "grading_failed": report.grading_failed,   # non-empty: not a grade (the CLI exits 3)
        "elapsed_s": report.elapsed_s,
        "layers_run": report.layers_run,
        "layers_not_run": report.layers_not_run,
        "layer_seconds": {k: round(v, 2) for k, v in report.layer_seconds.items()},
        "timed_first": report.timed_first,
        "device_info": report.device_info,
        "notes": report.notes,
        "failures": summary.failures(report),
        # advice checks that did not see their idea: no points, never a failure (Check.advice)
        "advice": [r.check.id for r in summary.advice(report)],
        "tests": [
            {"name": r.check.id, "title": r.check.title, "exercise": r.check.exercise,
             "layer": r.check.layer, "score": r.score, "max_score": r.max_score,
             "status": r.status, "message": clean(r.message),
             "hint": r.hint, "hint_from_failure": bool(r.failure_hint),
             "secondary": r.secondary,   # a property check that failed on a wrong answer
             "advice": r.check.advice,   # teaches without paying: 0 points, status "advice"
             "undecided": r.undecided,   # its readings left the credit open (verdicts.Tally)
             "hidden": r.check.hidden, "output": output_of(r), "duration_s": round(r.duration_s, 3),
             "picture": pictures.brief(r.picture)}   # where a failed comparison is wrong
            for r in report.results
        ],
    }


def to_gradescope(report: GradeReport, pngs: dict[str, bytes] | None = None) -> dict:
    """Gradescope's results.json: score, execution_time, output, tests[].

    Checks that could not run on the autograder's machine (no GPU) are left out of tests[] and
    counted nowhere; the output's "not run" line says which layers and why. Hidden checks are
    after_published tests, never with what the code printed under them, and the visible output
    counts public points only: nothing a student sees before publication tells how the hidden
    checks went. pngs (check id -> PNG, pictures.render_all): the first failures' pictures go
    into their tests' output as HTML (page.gradescope_pictures says which)."""
    pictured = page.gradescope_pictures(report, pngs or {})
    leads = {c: g["lead"] for g in summary.failures(report) for c in g["same_cause"]}
    repeats = summary.repeats(report.results)
    tests = []
    for r in report.results:
        if r.status == "not_run":
            continue
        cid = r.check.id
        text = clean(r.message)
        if cid in repeats:   # a traceback shown under several checks: in full only once
            text = f"{text.strip().splitlines()[0]}\n(the same error as {repeats[cid]}: its output has the rest)"
        if r.status == "advice":   # no points either way: the idea, and where the code differs
            text = f"[advice, no points] {text.removeprefix('advice, no points: ')}\nHint: {clean(r.hint)}"
        elif r.status not in ("passed", "not_run"):
            text = f"[{r.status}] {text}\nHint: {clean(r.hint)}"
            if cid in leads:
                text += f"\nProbably the same cause as {leads[cid]}."
        printed = output_of(r)
        if printed:
            text += f"\n\nYour code printed:\n{printed}"
        tests.append({
            "name": f"{r.check.exercise}: {r.check.title} [{r.check.layer}]"
                    + (" (advice, no points)" if r.check.advice else ""),
            "name_format": "text",
            "number": r.check.id,
            "score": r.score,
            "max_score": r.max_score,
            "status": "passed" if r.status == "passed" else "failed",
            "output": page.gradescope_output(text, pictured[cid], cid) if cid in pictured
                      else text.strip(),
            "output_format": "html" if cid in pictured else "text",
            "tags": [r.check.exercise, r.check.layer, summary.track_of(r) + " track"]
                    + (["hidden"] if r.check.hidden else []),
            "visibility": "after_published" if r.check.hidden else "visible",
        })
    public = dataclasses.replace(report, results=[r for r in report.results if not r.check.hidden])
    lines = [summary.total_line(public, HIDDEN_ON_GRADESCOPE) + ".", f"Graded on {report.device}."]
    missing = missing_files(report)
    if missing:
        lines.append(f"Not in the upload: {', '.join(missing)}. The autograder looks for these file "
                     f"names anywhere in it (loose, in a folder or in a zip): "
                     f"{', '.join(e + '.py' for e in EXERCISES)}.")
    if summary.target_header(report):
        lines += [summary.target_header(report) + "."] + summary.target_flags(report)
    if summary.not_run_line(report):
        lines.append(summary.not_run_line(report) + ".")
    if summary.isolation(report):
        lines.append(f"Isolation: {summary.isolation(report)}.")
    if summary.seccomp(report):
        lines.append(f"Seccomp filter: {summary.seccomp(report)}.")
    return {
        "score": report.score,
        "execution_time": int(round(report.elapsed_s)),
        "output": "\n".join(lines),
        "output_format": "text",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def missing_files(report: GradeReport) -> list[str]:
    """The exercise files the grader found no copy of, as "<exercise>.py", in the lesson's order."""
    missing = {r.check.exercise for r in report.results
               if r.status == "error" and r.message.startswith(f"{r.check.exercise}.py was not submitted")}
    return [f"{e}.py" for e in EXERCISES if e in missing]
