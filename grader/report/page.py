"""The report as a page (reports/grade.html beside the Markdown): one self-contained file that
opens from disk with no network and no script. Its styles are inline, its pictures data: URIs.

First the total and the failure to fix first, with its picture and hint, so that the first
screen says what to do; then the score table per exercise and layer, the other failures, the
advice and the TODOs, and every check with its message (and picture, where it failed a
comparison). Student text (messages, printed output, the folder's name) is escaped
(html.escape after summary.clean): it can neither close a tag nor add one.
"""

from __future__ import annotations

import base64
import html
import time
from pathlib import Path

from grader.report import summary, table
from grader.report.summary import clean, fmt
from grader.report.terminal import STATUS_MARK, device_line
from grader.results import FAILING, GradeReport

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin: 1.4em 0 .4em; }
.total { font-weight: 600; margin-bottom: .8em; } .dim { color: #666; font-size: .9em; }
.lead { border: 2px solid #c62828; border-radius: 6px; padding: .6em 1em; background: #fff8f8; }
.failure { border-left: 4px solid #c62828; padding: .2em .8em; margin: .8em 0; }
.hint { background: #e8f4fd; border-radius: 4px; padding: .3em .6em; margin: .4em 0; }
pre { white-space: pre-wrap; background: #f6f6f6; padding: .4em .6em; margin: .3em 0;
      font-size: 12px; max-height: 16em; overflow: auto; }
img { max-width: 100%; border: 1px solid #ddd; }
table { border-collapse: collapse; margin: .4em 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
.PASS { color: #2e7d32; font-weight: 600; } .FAIL, .ERROR, .CRASH, .TIMEOUT { color: #c62828;
  font-weight: 600; } .TODO { color: #b26a00; font-weight: 600; } .ADVICE { color: #00838f; }
details { margin: .2em 0; } summary { cursor: pointer; }
"""


def esc(text) -> str:
    return html.escape(clean(str(text)), quote=True)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def img(png: bytes | None, check_id: str) -> str:
    if not png:
        return ""
    return (f'<p><img src="{data_uri(png)}" alt="where {esc(check_id)} is wrong: yours, the '
            f'reference and the error against the tolerance"></p>')


def to_html(report: GradeReport, pngs: dict[str, bytes] | None = None, bench: Path | None = None) -> str:
    """The page; pngs: check id -> the PNG of its failure (pictures.render_all). Each picture
    is in the page once: under its failure at the top, else in the table of every check.
    bench: a `make bench` folder (measure.md and its plots), shown as the Measure section."""
    pngs = dict(pngs or {})
    by_id = {r.check.id: r for r in report.results}
    groups = [g for g in summary.failures(report) if by_id[g["lead"]].status != "not_implemented"]
    t = summary.totals(report)
    hidden = f" + hidden {fmt(t['hidden'][0])} / {fmt(t['hidden'][1])}" if t["hidden"] else ""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>Grade: {esc(report.submission)}</title>", f"<style>{STYLE}</style></head><body>",
           f"<h1>Grade: {fmt(t['public'][0])} / {fmt(t['public'][1])} public points{hidden}</h1>",
           f'<div class="total">{esc(summary.total_line(report))}</div>']
    if groups:
        out += ['<div class="lead"><h2 style="margin-top:0">Fix first</h2>',
                _failure(by_id[groups[0]["lead"]], groups[0], by_id, pngs), "</div>"]
    out += ["<h2>Score by exercise and layer</h2>", _table(report)]
    if len(groups) > 1:
        out.append("<h2>Then</h2>")
        out += [f'<div class="failure">{_failure(by_id[g["lead"]], g, by_id, pngs)}</div>'
                for g in groups[1:]]
    advice = summary.advice(report)
    if advice:
        out += ["<h2>Advice (no points)</h2>", f'<p class="dim">{esc(summary.ADVICE_NOTE)}</p><ul>']
        out += [f"<li><b>{esc(r.check.id)}</b>: {esc(r.check.title)}. "
                f"{esc(clean(r.message).strip().split(chr(10))[0])}"
                + (f'<div class="hint">Hint: {esc(r.hint)}</div>' if r.hint else "") + "</li>"
                for r in advice]
        out.append("</ul>")
    todo = summary.todos(report)
    if todo:
        out += ["<h2>Still to write</h2>", "<ul>"]
        out += [f"<li><b>{esc(ex)}</b> ({count} checks, {fmt(points)} points wait for):<ul>"
                + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul></li>"
                for ex, count, points, items in todo]
        out.append("</ul>")
    out += ["<h2>Every check</h2>", _checks(report, pngs)]
    out += _measure(bench) if bench else []
    out += ["<h2>This run</h2>", _facts(report)]
    out.append("</body></html>")
    return "\n".join(out)


def _failure(r, group: dict, by_id: dict, pngs: dict) -> str:
    mark = STATUS_MARK[r.status]
    if r.file_error:
        return (f'<p><span class="{mark}">{mark}</span> {esc(clean(r.message).split(chr(10))[0])}</p>'
                f"<pre>{esc(r.message)}</pre><p>It blocked {esc(summary.blocked(group, by_id))}.</p>")
    out = [f'<p><span class="{mark}">{mark}</span> <b>{esc(r.check.id)}</b> '
           f"({fmt(r.score)}/{fmt(r.max_score)}): {esc(r.check.title)}</p>"]
    if r.hint:
        out.append(f'<div class="hint"><b>Hint:</b> {esc(r.hint)}</div>')
    # the lead's picture, else that of the first check of the same cause that has one
    drawn = next((c for c in [r.check.id, *group["same_cause"]] if pngs.get(c)), None)
    if drawn and drawn != r.check.id:
        out.append(f'<p class="dim">The picture of {esc(drawn)}, of the same cause:</p>')
    out.append(img(pngs.pop(drawn, None), drawn or r.check.id))
    out.append(f"<pre>{esc(r.message)}</pre>")
    printed = summary.output_of(r)
    if printed:
        out.append(f"<details><summary>what your code printed</summary><pre>{esc(printed)}</pre></details>")
    if group["same_cause"]:
        same = ", ".join(f"{esc(c)} ({fmt(by_id[c].score)}/{fmt(by_id[c].max_score)})"
                         for c in group["same_cause"])
        out.append(f'<p class="dim">Probably the same cause: {same}</p>')
    return "\n".join(out)


def _table(report: GradeReport) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in table.header(report))
    rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
                   for row in table.rows(report))
    return f"<table><tr>{head}</tr>{rows}</table>"


def _checks(report: GradeReport, pngs: dict) -> str:
    out = []
    shown = summary.selected(report)
    for ex in summary.exercises_shown(report):
        out.append(f"<h3>{esc(ex)}</h3><table><tr><th></th><th>check</th><th>layer</th>"
                   f"<th>points</th><th>message</th></tr>")
        for r in (r for r in shown if r.check.exercise == ex):
            mark = STATUS_MARK[r.status]
            points = "advice" if r.check.advice else f"{fmt(r.score)}/{fmt(r.max_score)}"
            first = clean(r.message).strip().split("\n")[0] if r.message else ""
            body = esc(first[:300])
            if r.status in FAILING or r.status == "advice":
                extra = img(pngs.get(r.check.id), r.check.id) + f"<pre>{esc(r.message)}</pre>"
                if r.hint:
                    extra += f'<div class="hint">Hint: {esc(r.hint)}</div>'
                body = f"<details><summary>{body or 'details'}</summary>{extra}</details>"
            hidden = " (hidden)" if r.check.hidden else ""
            out.append(f'<tr><td class="{mark}">{mark}</td><td>{esc(r.check.id)}{hidden}</td>'
                       f"<td>{esc(r.check.layer)}</td><td>{points}</td><td>{body}</td></tr>")
        out.append("</table>")
    return "\n".join(out)


BENCH_PNG_BYTES = 400_000   # a plot larger than this is named, not embedded


def _measure(folder: Path) -> list[str]:
    """The lesson's Measure as `make bench` last wrote it (tools.bench: measure.md, the tables
    with the predictions beside what was measured, and its PNG plots), with when it was written:
    it is not part of this grade. Raw HTML in the Markdown is shown as text, not rendered."""
    from markdown_it import MarkdownIt   # rich's Markdown parser

    source = folder / "measure.md"
    try:
        text = source.read_text(errors="replace")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(source.stat().st_mtime))
    except OSError:
        return []
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    out = ["<h2>Measure (make bench)</h2>",
           f'<p class="dim">From {esc(source)}, written {when}: the last <code>make bench</code>, '
           f"not this grade.</p>", md.render(text)]
    for png in sorted(folder.glob("*.png")):
        try:
            data = png.read_bytes() if png.stat().st_size <= BENCH_PNG_BYTES else b""
        except OSError:
            continue
        out.append(f'<p><img src="{data_uri(data)}" alt="{esc(png.name)}"></p>' if data
                   else f'<p class="dim">{esc(png.name)} (too large to embed)</p>')
    return out


def _facts(report: GradeReport) -> str:
    facts = [f"submission: {report.submission}", f"device: {report.device}"]
    if report.device_info:
        facts.append(f"measured: {device_line(report.device_info)}")
    if summary.target_header(report):
        facts.append(summary.target_header(report))
    if summary.isolation(report):
        facts.append(f"isolation: {summary.isolation(report)}")
    if summary.not_run_line(report):
        facts.append(summary.not_run_line(report))
    facts.append(f"time: {report.elapsed_s:.1f} s ("
                 + ", ".join(f"{k} {v:.1f} s" for k, v in report.layer_seconds.items()) + ")")
    facts += list(report.notes)
    return "<ul>" + "".join(f"<li>{esc(f)}</li>" for f in facts) + "</ul>"


# Gradescope shows a test's output as HTML where it says so ("output_format": "html"); its
# results.json stays small: the pictures of the first few failures to fix, none of hidden checks
GRADESCOPE_PICTURES = 3
GRADESCOPE_PNG_BYTES = 80_000


def gradescope_pictures(report: GradeReport, pngs: dict[str, bytes]) -> dict[str, bytes]:
    """check id -> PNG for the Gradescope tests that carry a picture: the leads of the first
    GRADESCOPE_PICTURES failure groups that have one, public checks only."""
    if not pngs:
        return {}
    by_id = {r.check.id: r for r in report.results}
    leads = [g["lead"] for g in summary.failures(report)]
    chosen = [c for c in leads if c in pngs and not by_id[c].check.hidden
              and len(pngs[c]) <= GRADESCOPE_PNG_BYTES]
    return {c: pngs[c] for c in chosen[:GRADESCOPE_PICTURES]}


def gradescope_output(text: str, png: bytes, check_id: str) -> str:
    """A Gradescope test's output as HTML: the text as it would show, then the picture."""
    return f"<pre>{esc(text.strip())}</pre>{img(png, check_id)}"
