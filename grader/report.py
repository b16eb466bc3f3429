"""Reports of one grading run: terminal (rich), Markdown, JSON and Gradescope's results.json.

All four are written by the trusted process from `GradeReport`, after every worker has been
stopped, so nothing a submission wrote to disk survives under a report's name.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.registry import EXERCISES, LAYERS
from grader.results import NOT_SELECTED, GradeReport

STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT",
               "crashed": "CRASH", "not_implemented": "TODO", "not_run": "-"}
STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "red",
                "crashed": "red bold", "not_implemented": "yellow", "not_run": "dim"}


def _fmt(x: float) -> str:
    return f"{x:g}"


def device_line(info: dict) -> str:
    """The GPU (grader.judge.devices.describe) and the ceilings measured in this run, for headers."""
    cap = info.get("capability") or ["?", "?"]
    parts = [f"{info.get('name')} (sm_{cap[0]}{cap[1]})", f"{info.get('sms')} SMs",
             f"{info.get('total_memory_gb', 0):.0f} GB",
             f"{(info.get('smem_per_block') or 0) / 1024:.0f} KB shared memory per block",
             f"{(info.get('l2_bytes') or 0) / 2**20:.0f} MB L2", f"profile {info.get('profile')}"]
    if "copy_gbs" in info:
        parts.append(f"copy {info['copy_gbs']:g} GB/s")
    if "matmul_tflops" in info:
        parts.append(f"fp16 matmul {info['matmul_tflops']:g} TFLOP/s")
    return ", ".join(parts)


# ------------------------------------------------------------------------------------ JSON


def to_json(report: GradeReport) -> dict:
    return {
        "score": report.score,
        "max_score": report.max_score,
        "submission": report.submission,
        "device": report.device,
        "elapsed_s": report.elapsed_s,
        "layers_run": report.layers_run,
        "layers_not_run": report.layers_not_run,
        "layer_seconds": {k: round(v, 2) for k, v in report.layer_seconds.items()},
        "device_info": report.device_info,
        "notes": report.notes,
        "tests": [
            {"name": r.check.id, "title": r.check.title, "exercise": r.check.exercise,
             "layer": r.check.layer, "score": r.score, "max_score": r.max_score,
             "status": r.status, "message": r.message,
             "hint": r.hint, "hint_from_failure": bool(r.failure_hint),
             "hidden": r.check.hidden, "output": r.output, "duration_s": round(r.duration_s, 3)}
            for r in report.results
        ],
    }


# ------------------------------------------------------------------------------ Gradescope


def to_gradescope(report: GradeReport) -> dict:
    """Gradescope's results.json: score, execution_time, output, tests[].

    Checks that could not run on the autograder's machine are listed with max_score 0 and the
    reason, so a student sees they were not counted against them.
    """
    tests = []
    for r in report.results:
        text = r.message
        if r.status not in ("passed", "not_run"):
            text = f"[{r.status}] {r.message}\nHint: {r.hint}"
        if r.output:
            text += f"\n\nYour code printed:\n{r.output}"
        tests.append({
            "name": f"{r.check.exercise}: {r.check.title} [{r.check.layer}]",
            "name_format": "text",
            "number": r.check.id,
            "score": r.score,
            "max_score": r.max_score,
            "status": "passed" if r.status == "passed" else "failed",
            "output": text.strip(),
            "output_format": "text",
            "tags": [r.check.exercise, r.check.layer] + (["hidden"] if r.check.hidden else []),
            "visibility": "after_published" if r.check.hidden else "visible",
        })
    not_run = "; ".join(f"{k}: {v}" for k, v in report.layers_not_run.items())
    return {
        "score": report.score,
        "execution_time": int(round(report.elapsed_s)),
        "output": (f"Graded on {report.device}. Layers run: {', '.join(report.layers_run)}."
                   + (f" Not run: {not_run}." if not_run else "")),
        "output_format": "text",
        "stdout_visibility": "visible",
        "tests": tests,
    }


# -------------------------------------------------------------------------------- Markdown


def _table(report: GradeReport) -> list[list[str]]:
    """Rows: exercise, then score/max per layer, then the total."""
    rows = []
    for ex in EXERCISES:
        if all(r.message == NOT_SELECTED for r in report.results if r.check.exercise == ex):
            continue
        cells, total, top = [ex], 0.0, 0.0
        for layer in LAYERS:
            rs = [r for r in report.results if r.check.exercise == ex and r.check.layer == layer]
            if not rs:
                cells.append("")
            elif all(r.status == "not_run" for r in rs):
                cells.append("not run")
            else:
                s, m = sum(r.score for r in rs), sum(r.max_score for r in rs)
                total, top = total + s, top + m
                cells.append(f"{_fmt(s)}/{_fmt(m)}")
        cells.append(f"{_fmt(total)}/{_fmt(top)}")
        rows.append(cells)
    return rows


def to_markdown(report: GradeReport) -> str:
    out = [f"# Grade: {_fmt(report.score)} / {_fmt(report.max_score)}", "",
           f"- submission: `{report.submission}`", f"- device: {report.device}",
           *([f"- measured: {device_line(report.device_info)}"] if report.device_info else []),
           f"- time: {report.elapsed_s:.1f} s ("
           + ", ".join(f"{k} {v:.1f} s" for k, v in report.layer_seconds.items()) + ")", ""]
    if report.layers_not_run:
        out += ["Layers not run (not counted in the maximum):", ""]
        out += [f"- **{k}**: {v}" for k, v in report.layers_not_run.items()] + [""]
    header = ["exercise", *LAYERS, "total"]
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in _table(report)] + [""]
    for hidden in (False, True):
        rs = [r for r in report.results if r.check.hidden == hidden]
        if not rs:
            continue
        out += ["## Hidden checks" if hidden else "## Checks", ""]
        out += ["| | check | layer | points | message |", "|---|---|---|---|---|"]
        for r in rs:
            msg = r.message.splitlines()[0] if r.message else ""
            out.append(f"| {STATUS_MARK[r.status]} | `{r.check.id}` | {r.check.layer} | "
                       f"{_fmt(r.score)}/{_fmt(r.max_score)} | {msg.replace('|', '/')} |")
        out.append("")
    failing = [r for r in report.results if r.status not in ("passed", "not_run")]
    if failing:
        out += ["## What to fix", ""]
        for r in failing:
            out += [f"### {STATUS_MARK[r.status]} `{r.check.id}` ({_fmt(r.score)}/{_fmt(r.max_score)})",
                    "", "```", r.message, "```", "", f"**Hint:** {r.hint}", ""]
            if r.output:
                out += ["Your code printed:", "", "```", r.output, "```", ""]
    for note in report.notes:
        out += [f"> {note}", ""]
    return "\n".join(out)


# -------------------------------------------------------------------------------- terminal


def print_terminal(report: GradeReport, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(soft_wrap=True)   # long messages wrap in the terminal, not here
    table = Table(title=f"{report.submission} on {report.device}", title_justify="left")
    if report.device_info:
        console.print(f"[dim]{device_line(report.device_info)}[/]", highlight=False)
    table.add_column("exercise")
    for layer in LAYERS:
        table.add_column(layer, justify="right")
    table.add_column("total", justify="right", style="bold")
    for row in _table(report):
        table.add_row(*row)
    console.print(table)
    for r in report.results:
        if r.status in ("passed", "not_run", "not_implemented"):
            continue
        console.print(f"[{STATUS_STYLE[r.status]}]{STATUS_MARK[r.status]:>7}[/] "
                      f"{r.check.id} ({_fmt(r.score)}/{_fmt(r.max_score)}) {r.check.title}",
                      highlight=False)
        for line in r.message.splitlines()[:12]:
            console.print(f"         {line}", markup=False, highlight=False, soft_wrap=True)
        console.print(f"         [cyan]hint:[/] {r.hint}", highlight=False, soft_wrap=True)
        if r.output:
            console.print("         [dim]printed:[/] " + r.output.splitlines()[0][:150],
                          highlight=False, soft_wrap=True)
    _print_todo(report, console)
    for layer, reason in report.layers_not_run.items():
        console.print(f"[dim]not run: {layer}: {reason}[/]", highlight=False)
    times = ", ".join(f"{k} {v:.1f}s" for k, v in report.layer_seconds.items())
    console.print(f"[bold]Total: {_fmt(report.score)} / {_fmt(report.max_score)}[/]  "
                  f"({report.elapsed_s:.1f} s: {times})", highlight=False)
    for note in report.notes:
        console.print(f"[yellow]{note}[/]", highlight=False)


def _print_todo(report: GradeReport, console) -> None:
    """Checks waiting on a stub: one line per exercise, and each TODO once (not per check)."""
    for ex in EXERCISES:
        rs = [r for r in report.results if r.check.exercise == ex and r.status == "not_implemented"]
        if not rs:
            continue
        todos = list(dict.fromkeys(r.message.split(" is not implemented yet: ", 1)[-1] for r in rs))
        points = _fmt(sum(r.max_score for r in rs))
        console.print(f"[{STATUS_STYLE['not_implemented']}]   TODO[/] {ex}: {len(rs)} checks "
                      f"({points} points) wait for", highlight=False)
        for todo in todos:
            console.print(f"         {todo}", markup=False, highlight=False, soft_wrap=True)


def write(report: GradeReport, json_path=None, markdown_path=None, gradescope_path=None) -> None:
    for path, text in ((json_path, lambda: json.dumps(to_json(report), indent=1)),
                       (markdown_path, lambda: to_markdown(report)),
                       (gradescope_path, lambda: json.dumps(to_gradescope(report), indent=1))):
        if path:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)   # replace whatever is there, a submission's file too
            path.write_text(text() + "\n")
