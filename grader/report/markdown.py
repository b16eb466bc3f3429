"""The Markdown report (reports/grade.md): the terminal's summary first, then per-check detail.

Student text goes into code fences longer than any backtick run it holds, or is escaped inline,
so it can neither close a fence nor fake a heading, a link or a PASS row.
"""

from __future__ import annotations

import re

from grader.report import pictures, summary, table
from grader.report.summary import clean, fmt
from grader.report.terminal import STATUS_MARK, device_line
from grader.results import GradeReport

_INLINE = re.compile(r"([\\`*_\[\]<>|#~!])")


def inline(text: str) -> str:
    """One line of student text, safe inside a table cell or a sentence."""
    return _INLINE.sub(r"\\\1", clean(text).replace("\n", " "))


def fenced(text: str) -> list[str]:
    runs = [len(m) for m in re.findall(r"`+", text)] or [0]
    fence = "`" * max(3, max(runs) + 1)
    return [fence, clean(text), fence]


def to_markdown(report: GradeReport) -> str:
    t = summary.totals(report)
    hidden = f" + hidden {fmt(t['hidden'][0])} / {fmt(t['hidden'][1])}" if t["hidden"] else ""
    out = [f"# Grade: {fmt(t['public'][0])} / {fmt(t['public'][1])} public points{hidden}", "",
           f"**{summary.total_line(report)}**", ""]
    header = table.header(report)
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in table.rows(report)] + [""]
    by_id = {r.check.id: r for r in report.results}
    groups = summary.failures(report)
    todo = summary.todos(report)
    if groups and any(by_id[g["lead"]].status != "not_implemented" for g in groups):
        out += ["## Fix first", ""]
        for g in groups:
            r = by_id[g["lead"]]
            if r.status == "not_implemented":
                continue
            line = f"1. **{STATUS_MARK[r.status]} `{r.check.id}`** ({fmt(r.score)}/{fmt(r.max_score)}): {r.check.title}"
            if r.file_error:
                line = (f"1. **{STATUS_MARK[r.status]}** {inline(clean(r.message).split(chr(10))[0])}; "
                        f"it blocked {summary.blocked(g, by_id)}")
            elif g["same_cause"]:
                line += "; probably the same cause: " + ", ".join(f"`{c}`" for c in g["same_cause"])
            out.append(line)
        out.append("")
    advice = summary.advice(report)
    if advice:
        out += ["## Advice (no points)", "",
                f"These checks pay nothing ({summary.ADVICE_NOTE}); they say where your code "
                f"differs from the lesson's idea.", ""]
        for r in advice:
            out.append(f"- **ADVICE `{r.check.id}`**: {r.check.title}. "
                       f"{inline(clean(r.message).strip().split(chr(10))[0])}")
            if r.hint:
                out.append(f"  **Hint:** {inline(r.hint)}")
        out.append("")
    if todo:
        out += ["## Still to write", ""]
        for ex, count, points, items in todo:
            out.append(f"- **{ex}** ({count} checks, {fmt(points)} points wait for):")
            out += [f"  - {inline(i)}" for i in items]
        out.append("")
    facts = [f"- submission: {inline(report.submission)}", f"- device: {report.device}"]
    if report.device_info:
        facts.append(f"- measured: {device_line(report.device_info)}")
    if summary.target_header(report):
        facts.append(f"- {inline(summary.target_header(report))}")
    if summary.isolation(report):
        facts.append(f"- isolation: {summary.isolation(report)}")
    if summary.seccomp(report):
        facts.append(f"- seccomp filter: {summary.seccomp(report)}")
    if summary.not_run_line(report):
        facts.append(f"- {summary.not_run_line(report)}")
    facts.append(f"- time: {report.elapsed_s:.1f} s ("
                 + ", ".join(f"{k} {v:.1f} s" for k, v in report.layer_seconds.items()) + ")")
    out += facts + [""]
    for note in report.notes:
        out += [f"> {inline(note)}", ""]
    out += _target(report)

    # ---------------------------------------------------------------- detail
    shown = summary.selected(report)
    for hidden in (False, True):
        rs = [r for r in shown if r.check.hidden == hidden]
        if not rs:
            continue
        out += ["## Hidden checks (instructors' runs only)" if hidden else "## Checks", ""]
        out += ["| | check | layer | points | message |", "|---|---|---|---|---|"]
        for r in rs:
            msg = clean(r.message).strip().split("\n")[0] if r.message else ""
            points = "advice" if r.check.advice else f"{fmt(r.score)}/{fmt(r.max_score)}"
            out.append(f"| {STATUS_MARK[r.status]} | `{r.check.id}` | {r.check.layer} | "
                       f"{points} | {inline(msg[:300])} |")
        out.append("")
    repeats = summary.repeats(report.results)
    detail = [by_id[c] for g in groups
              for c in ([g["lead"]] if by_id[g["lead"]].file_error else [g["lead"], *g["same_cause"]])
              if by_id[c].status != "not_implemented"]
    drawn = {r.check.id for r in pictures.pictured(report)}
    if detail:
        out += ["## Failures in detail", ""]
        for r in detail:
            out += [f"### {STATUS_MARK[r.status]} `{r.check.id}` ({fmt(r.score)}/{fmt(r.max_score)})", ""]
            if r.check.id in repeats:
                out += [f"Same error as `{repeats[r.check.id]}` (above).", ""]
            else:
                out += fenced(r.message) + [""]
            if r.check.id in drawn:   # written beside this report (grader.report.write)
                out += [f"![where {r.check.id} is wrong: yours, the reference, the error]"
                        f"(pictures/{r.check.id}.png)", ""]
            if r.file_error:
                group = next(g for g in groups if g["lead"] == r.check.id)
                out += [f"It blocked {summary.blocked(group, by_id)}.", ""]
            if r.hint:
                out += [f"**Hint:** {inline(r.hint)}", ""]
            printed = summary.output_of(r)
            if printed:
                out += ["Your code printed:", ""] + fenced(printed) + [""]
    return "\n".join(out)


def _target(report: GradeReport) -> list[str]:
    """The grading target's section: each kernel that would not fit, by exercise, and every
    kernel compiled for it (advice from the worker's compile: no score moves)."""
    t = summary.target_of(report)
    if not t:
        return []
    out = [f"## Target {inline(t.get('short', ''))} (sm_{t.get('arch')})", "",
           inline(summary.target_header(report)) + ". " + inline(t.get("note") or ""), ""]
    flags = summary.target_flags(report)
    if flags:
        out += [f"- **{inline(line)}**" if i < len(t.get("over_limit") or []) else f"- {inline(line)}"
                for i, line in enumerate(flags)] + [""]
    kernels = t.get("kernels") or []
    if kernels:
        out += ["| exercise | kernel | num_warps | num_stages | registers (spills) here | shared here "
                "| shared on target | fits? |", "|---|---|---|---|---|---|---|---|"]
        for e in kernels:
            consts = ", ".join(f"{k}={v}" for k, v in (e.get("constexprs") or {}).items())
            fits = {True: "yes", False: "**no**", None: "not checked"}[e.get("fits")]
            out.append(f"| {inline(e.get('exercise', ''))} | {inline(e.get('name', ''))} "
                       f"{inline(consts)} | {e.get('num_warps')} | {e.get('num_stages')} | "
                       f"{e.get('n_regs')} ({e.get('n_spills')}) | {e.get('shared_here')} | {e.get('shared')} / {t.get('smem_per_block')} | "
                       f"{fits} |")
        out.append("")
    return out
