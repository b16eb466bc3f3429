"""The class view for instructors: what a batch's submissions got wrong, as a page and a CSV.

`python -m grader batch` writes, beside gradebook.csv, from the JSON report of every submission
graded (reports/<name>.json, each sealed by its grader process):

    class.html   the score distribution; each check's failure rate; the lead mistakes ranked
                 by how many submissions they led (the idea a failure names: its check and
                 hint); on the perf layer, the slowest kernels against their baseline. Plots
                 are matplotlib PNGs inlined as data: URIs: one file, no network, no script.
    class.csv    one row per check: how many submissions it failed, was not started, led
                 the report for, and the hint it gave most often.

Everything is computed from the reports, in the batch's own (trusted) process; student text
that reaches the page (messages, hints, submission names) is escaped.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections import Counter
from pathlib import Path

from grader.report.page import data_uri
from grader.report.summary import clean

FAILED = ("failed", "error", "timeout", "crashed")
TOP = 15   # mistakes and slow kernels shown
# a perf check's message: "... = 1.93x" per size (flash_triton, flash_backward: times the baseline)
RATIO = re.compile(r"=\s*(\d+(?:\.\d+)?)x\b")


def esc(text) -> str:
    return html.escape(clean(str(text)), quote=True)


def load(reports: Path, names: list[str]) -> dict[str, dict]:
    """submission -> its JSON report, for the submissions whose report is there and readable."""
    out = {}
    for name in names:
        try:
            out[name] = json.loads((reports / f"{name}.json").read_text())
        except (OSError, ValueError):
            continue
    return out


def checks(graded: dict[str, dict]) -> list[dict]:
    """One row per check: id, exercise, layer, points, and over the submissions it ran on how
    many failed it, were not started (the stub), led with it, and its most common hint."""
    rows: dict[str, dict] = {}
    hints: dict[str, Counter] = {}
    for report in graded.values():
        leads = {g["lead"] for g in report.get("failures") or []}
        for t in report.get("tests") or []:
            if t.get("status") == "not_run":
                continue
            row = rows.setdefault(t["name"], {"check": t["name"], "exercise": t.get("exercise", ""),
                                              "layer": t.get("layer", ""),
                                              "points": t.get("max_score", 0), "graded": 0,
                                              "failed": 0, "not_started": 0, "led": 0})
            row["graded"] += 1
            row["failed"] += t.get("status") in FAILED
            row["not_started"] += t.get("status") == "not_implemented"
            if t.get("status") in FAILED and t["name"] in leads:
                row["led"] += 1
            if t.get("status") in FAILED and t.get("hint"):
                hints.setdefault(t["name"], Counter())[t["hint"]] += 1
    for cid, row in rows.items():
        row["failure_rate"] = round(row["failed"] / row["graded"], 3) if row["graded"] else 0.0
        row["common_hint"] = hints[cid].most_common(1)[0][0] if cid in hints else ""
    return sorted(rows.values(), key=lambda r: (-r["failure_rate"], r["check"]))


def mistakes(graded: dict[str, dict]) -> list[dict]:
    """The failures that lead each report, one per exercise (what its report says to fix
    first there), grouped by their idea (the check and the hint it gave), most submissions
    first. A stub is not a mistake: an exercise not started leads nothing here."""
    counts: Counter = Counter()
    who: dict[tuple, list[str]] = {}
    for name, report in graded.items():
        tests = {t["name"]: t for t in report.get("tests") or []}
        seen = set()
        for g in report.get("failures") or []:
            t = tests.get(g["lead"])
            if not t or t.get("status") == "not_implemented" or t.get("exercise") in seen:
                continue
            seen.add(t.get("exercise"))
            key = (g["lead"], t.get("hint") or "")
            counts[key] += 1
            who.setdefault(key, []).append(name)
    return [{"check": c, "hint": h, "submissions": n, "who": who[(c, h)]}
            for (c, h), n in counts.most_common()]


def slowest(graded: dict[str, dict]) -> list[dict]:
    """Perf-layer checks whose message gives times against a baseline ("= 1.93x"): per
    submission and check, the largest ratio, slowest first."""
    out = []
    for name, report in graded.items():
        for t in report.get("tests") or []:
            if t.get("layer") != "perf" or t.get("status") in ("not_run", "not_implemented"):
                continue
            ratios = [float(x) for x in RATIO.findall(t.get("message") or "")]
            if ratios:
                out.append({"submission": name, "check": t["name"], "ratio": max(ratios)})
    return sorted(out, key=lambda r: -r["ratio"])


def write_csv(path: Path, rows: list[dict]) -> None:
    fields = ["check", "exercise", "layer", "points", "graded", "failed", "not_started", "led",
              "failure_rate", "common_hint"]
    part = path.with_name(f".{path.name}.part")
    with open(part, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    part.replace(path)


# ----------------------------------------------------------------------------- the plots


def _figure(height: float):
    # matplotlib only here, once every grade is over; its defaults, not a matplotlibrc of the
    # current folder (as grader/report/pictures.py)
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matplotlib.rcdefaults()
    fig = Figure(figsize=(9, height), dpi=80, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def plot_scores(book: list[dict]) -> bytes:
    fig = _figure(3.0)
    ax = fig.subplots()
    scores = [100 * float(r["total"]) / float(r["max"]) for r in book
              if r.get("total") and r.get("max") and float(r["max"]) > 0]
    ax.hist(scores, bins=[i * 5 for i in range(21)], color="tab:blue", edgecolor="white")
    failed = sum(1 for r in book if r.get("note"))
    ax.set_xlabel("score, % of the points graded")
    ax.set_ylabel("submissions")
    ax.set_title(f"score distribution: {len(scores)} graded"
                 + (f", {failed} could not be graded" if failed else ""))
    ax.set_xlim(0, 100)
    ax.yaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def plot_checks(rows: list[dict]) -> bytes:
    shown = [r for r in rows if r["failed"] or r["not_started"]][:30][::-1]
    fig = _figure(max(2.0, 0.22 * len(shown) + 1.0))
    ax = fig.subplots()
    if not shown:
        ax.text(0.5, 0.5, "no check failed", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    names = [r["check"] for r in shown]
    failed = [r["failed"] / r["graded"] for r in shown]
    stub = [r["not_started"] / r["graded"] for r in shown]
    ax.barh(names, failed, color="tab:red", label="failed")
    ax.barh(names, stub, left=failed, color="tab:orange", alpha=0.5, label="not started (stub)")
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of the submissions graded on the check")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def plot_mistakes(found: list[dict]) -> bytes:
    shown = found[:TOP][::-1]
    fig = _figure(max(2.0, 0.3 * len(shown) + 1.0))
    ax = fig.subplots()
    if not shown:
        ax.text(0.5, 0.5, "no failure led a report", ha="center", va="center", transform=ax.transAxes)
        return _png(fig)
    labels = [f"{m['check']}: {m['hint'][:60]}{'...' if len(m['hint']) > 60 else ''}" for m in shown]
    ax.barh(range(len(shown)), [m["submissions"] for m in shown], color="tab:purple")
    ax.set_yticks(range(len(shown)), labels, fontsize=7)
    ax.set_xlabel("submissions whose report it led")
    ax.xaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def plot_slowest(found: list[dict]) -> bytes:
    shown = found[:TOP][::-1]
    fig = _figure(max(2.0, 0.3 * len(shown) + 1.0))
    ax = fig.subplots()
    ax.barh([f"{s['submission']}: {s['check']}" for s in shown], [s["ratio"] for s in shown],
            color="tab:gray")
    ax.axvline(1.0, color="black", lw=0.8, ls=":")
    ax.set_xlabel("time / the baseline's (PyTorch in the same run), at the slowest size")
    ax.tick_params(axis="y", labelsize=7)
    return _png(fig)


# ------------------------------------------------------------------------------ the page


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.4em; }
img { max-width: 100%; border: 1px solid #ddd; } .dim { color: #666; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: 2px 8px;
  text-align: left; vertical-align: top; font-size: 13px; }
"""


def to_html(book: list[dict], graded: dict[str, dict], rows: list[dict], found: list[dict],
            slow: list[dict]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>Class view</title>", f"<style>{STYLE}</style></head><body>",
           f"<h1>Class view: {len(book)} submissions</h1>",
           f'<p class="dim">From each submission\'s report in reports/ ({len(graded)} read); '
           f"class.csv has the table of checks.</p>",
           "<h2>What to teach again: the failures that led the most reports</h2>",
           _img(plot_mistakes(found), "the lead mistakes, by how many submissions they led")]
    if found:
        out.append("<table><tr><th>submissions</th><th>check</th><th>hint it gave</th><th>who</th></tr>")
        out += [f"<tr><td>{m['submissions']}</td><td>{esc(m['check'])}</td><td>{esc(m['hint'])}</td>"
                f"<td>{esc(', '.join(m['who'][:8]))}{' ...' if len(m['who']) > 8 else ''}</td></tr>"
                for m in found[:TOP]]
        out.append("</table>")
    out += ["<h2>Scores</h2>", _img(plot_scores(book), "the score distribution"),
            "<h2>Each check's failure rate</h2>", _img(plot_checks(rows), "failure rate per check")]
    out += ["<h2>Slowest kernels (perf layer)</h2>"]
    if slow:
        out.append(_img(plot_slowest(slow), "the slowest kernels against their baseline"))
    else:
        out.append('<p class="dim">No perf-layer times in these reports (graded without a GPU, '
                   "or no kernel was timed).</p>")
    out.append("<h2>Every check</h2><table><tr><th>check</th><th>layer</th><th>points</th>"
               "<th>failed</th><th>not started</th><th>led</th><th>graded</th></tr>")
    out += [f"<tr><td>{esc(r['check'])}</td><td>{esc(r['layer'])}</td><td>{r['points']:g}</td>"
            f"<td>{r['failed']}</td><td>{r['not_started']}</td><td>{r['led']}</td>"
            f"<td>{r['graded']}</td></tr>" for r in rows]
    out.append("</table></body></html>")
    return "\n".join(out)


def _img(png: bytes, alt: str) -> str:
    return f'<p><img src="{data_uri(png)}" alt="{esc(alt)}"></p>'


def write(out: Path, book: list[dict]) -> tuple[Path, Path]:
    """class.html and class.csv in `out` (the batch's folder), from the gradebook's rows and
    the reports in out/reports; their paths."""
    graded = load(out / "reports", sorted(r["submission"] for r in book))
    rows = checks(graded)
    page, table = out / "class.html", out / "class.csv"
    write_csv(table, rows)
    text = to_html(book, graded, rows, mistakes(graded), slowest(graded))
    part = page.with_name(f".{page.name}.part")
    part.write_text(text + "\n")
    part.replace(page)
    return page, table
