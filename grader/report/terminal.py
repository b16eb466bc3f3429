"""The terminal report: one screen (40 lines or fewer at 100 columns), most specific failure first.

Everything a submission can influence (messages, printed output, the folder name) goes into
rich `Text` objects, never into markup, so `[/x]` or `[green]PASS` prints as typed; control
characters are replaced first (`summary.clean`).
"""

from __future__ import annotations

import math

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.report import summary, table
from grader.report.summary import clean, fmt
from grader.results import GradeReport

SCREEN = 39       # rows the report may take: 40 with the "Grading ..." line printed before it
INDENT = " " * 8
STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT",
               "crashed": "CRASH", "not_implemented": "TODO", "not_run": "-"}
STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "red",
                "crashed": "red bold", "not_implemented": "yellow", "not_run": "dim"}


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


class Screen:
    """Lines to print, each clipped to a number of terminal rows, counted against SCREEN."""

    def __init__(self, width: int):
        self.width = max(40, width)
        self.lines: list[Text] = []

    @property
    def rows(self) -> int:
        return sum(self.rows_of(t) for t in self.lines)

    def rows_of(self, text: Text) -> int:
        return sum(max(1, math.ceil(cell_len(line) / self.width)) for line in text.plain.split("\n"))

    def line(self, *parts, rows: int = 1) -> Text:
        """parts: plain strings (student text welcome) or (string, style) pairs."""
        t = Text.assemble(*parts)
        plain = t.plain
        limit = rows * self.width - 1
        if cell_len(plain) > limit:
            t.truncate(limit - 1)
            t.append("…")
        return t


def print_terminal(report: GradeReport, console: Console | None = None, details: str | None = None) -> None:
    console = console or Console(soft_wrap=True, highlight=False)
    screen = Screen(console.width)
    head: list = []
    if report.device_info:
        head.append(screen.line((device_line(report.device_info), "dim")))
    if summary.target_header(report):
        head.append(screen.line((summary.target_header(report), "dim"), rows=2))
        flags = summary.target_flags(report)
        for line in flags[:3]:
            head.append(screen.line(("TARGET ", "yellow"), line, rows=3))
        if len(flags) > 3:
            head.append(screen.line(("TARGET ", "yellow"), f"{len(flags) - 3} more: see the "
                                    f"Markdown or JSON report"))
    grid = Table(title=Text(f"{clean(report.submission)} on {report.device}"), title_justify="left")
    for i, name in enumerate(table.header(report)):
        grid.add_column(name, justify="left" if i == 0 else "right",
                        style="bold" if name == "total" else None)
    body = table.rows(report)
    for row in body:
        grid.add_row(*row)
    table_rows = 5 + len(body)

    tail = []
    not_run = summary.not_run_line(report)
    if not_run:
        tail.append(screen.line((not_run, "dim"), rows=2))
    if summary.isolation(report):
        tail.append(screen.line((f"isolation: {summary.isolation(report)}", "dim")))
    if summary.seccomp(report):
        tail.append(screen.line((f"seccomp filter: {summary.seccomp(report)}", "dim")))
    tail.append(screen.line((summary.total_line(report), "bold"), f"  ({report.elapsed_s:.0f} s)",
                            rows=2))   # time per layer: in the Markdown report
    for note in report.notes:
        tail.append(screen.line((clean(note), "yellow"), rows=2))
    budget = SCREEN - table_rows - sum(screen.rows_of(t) for t in head + tail)

    middle = _failures(report, screen, budget - _todo_rows(report, screen), details)
    middle += _todo(report, screen, budget - sum(screen.rows_of(t) for t in middle))
    for t in head:
        console.print(t, soft_wrap=True)
    console.print(grid)
    for t in middle + tail:
        console.print(t, soft_wrap=True)


def _short(cid: str, lead: str) -> str:
    ex, _, rest = cid.partition(".")
    return rest if lead.startswith(ex + ".") else cid


def _block(r, group: list, by_id: dict, repeats: dict, screen: Screen, full: bool) -> list[Text]:
    mark = (f"{STATUS_MARK[r.status]:>6} ", STATUS_STYLE[r.status])
    out = [screen.line(mark, f"{r.check.id} ({fmt(r.score)}/{fmt(r.max_score)}) {r.check.title}")]
    if r.check.id in repeats:
        out.append(screen.line(INDENT, (f"same error as {repeats[r.check.id]}", "dim")))
    elif r.message:
        out.append(screen.line(INDENT, clean(r.message).strip().split("\n")[0], rows=2 if full else 1))
    if r.hint:
        out.append(screen.line(INDENT, ("hint: ", "cyan"), clean(r.hint),
                               rows=2 if full else 1))
    printed = summary.output_of(by_id[r.check.id])
    if printed and full:
        out.append(screen.line(INDENT, ("printed: ", "dim"), printed.strip().split("\n")[0]))
    if group:
        same = ", ".join(f"{_short(c, r.check.id)} ({fmt(by_id[c].score)}/{fmt(by_id[c].max_score)})"
                         for c in group)
        out.append(screen.line(INDENT, ("probably the same cause: ", "dim"), same, rows=2))
    return out


def _failures(report: GradeReport, screen: Screen, budget: int, details: str | None) -> list[Text]:
    by_id = {r.check.id: r for r in report.results}
    repeats = summary.repeats(report.results)
    groups = [g for g in summary.failures(report)
              if by_id[g["lead"]].status != "not_implemented"
              or any(by_id[c].status != "not_implemented" for c in g["same_cause"])]
    out: list[Text] = []
    left = list(groups)
    while left:
        g = left[0]
        lead = by_id[g["lead"]]
        if lead.status == "not_implemented":
            same = [c for c in g["same_cause"] if by_id[c].status != "not_implemented"]
            block = [screen.line((f"{'FAIL':>6} ", "red"), ", ".join(same) + ": probably because "
                                 f"{lead.check.id} is not implemented yet", rows=2)]
        else:
            block = _block(lead, g["same_cause"], by_id, repeats, screen, full=True)
            rest = 1 + (1 if len(left) > 1 else 0)   # room kept for the "also failing" line
            if sum(screen.rows_of(t) for t in out + block) + rest > budget:
                block = _block(lead, g["same_cause"], by_id, repeats, screen, full=False)
        needed = sum(screen.rows_of(t) for t in out + block) + (2 if len(left) > 1 else 0)
        if needed > budget and out:
            break
        out += block
        left.pop(0)
    if left:
        names = ", ".join(f"{g['lead']}" + (f" (+{len(g['same_cause'])})" if g["same_cause"] else "")
                          for g in left)
        where = f"; details in {details}" if details else ""
        out.append(screen.line((f"{'FAIL':>6} ", "red"), f"also: {names}{where}", rows=2))
    return out


def _todo_rows(report: GradeReport, screen: Screen) -> int:
    return sum(screen.rows_of(t) for t in _todo(report, screen, 10**6))


def _todo(report: GradeReport, screen: Screen, budget: int) -> list[Text]:
    """Checks waiting on a stub: one line per exercise, then each TODO once (not per check)."""
    out: list[Text] = []
    entries = summary.todos(report)
    for n, (ex, count, points, items) in enumerate(entries):
        block = [screen.line((f"{'TODO':>6} ", STATUS_STYLE["not_implemented"]),
                             f"{ex}: {count} checks ({fmt(points)} points) wait for")]
        block += [screen.line(INDENT, item, rows=2) for item in items]
        if sum(screen.rows_of(t) for t in out + block) + (len(entries) - n - 1) > budget:
            block = block[:1]
        out += block
    return out
