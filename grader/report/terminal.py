"""The terminal report: one screen (40 lines or fewer at 100 columns), most specific failure first.

Long lines wrap at the terminal's width and no line is cut: what does not fit the screen is left
out whole (a later failure, a TODO line), and named on the "also" line or in the Markdown report.

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

from grader.report import pictures, summary, table
from grader.report.summary import clean, fmt
from grader.results import FAILING, GradeReport

SCREEN = 39       # rows the report may take: 40 with the "Grading ..." line printed before it
INDENT = " " * 8  # where a failure's message and hint start, and every wrapped row
MESSAGE_LINES = 12   # of the lead failure's message; the Markdown report has all of it
ALSO_ROWS = 2     # kept for the "also" line while failures are left to show
STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT",
               "crashed": "CRASH", "not_implemented": "TODO", "not_run": "-", "advice": "ADVICE"}
STATUS_STYLE = {"passed": "green", "failed": "red", "error": "red", "timeout": "red",
                "crashed": "red bold", "not_implemented": "yellow", "not_run": "dim",
               "advice": "cyan"}


def device_line(info: dict) -> str:
    """The GPU (grader.judge.machine.devices.describe) and the ceilings measured in this run, for headers."""
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
    """Lines to print, wrapped at the console's width (never cut), and the rows they take."""

    def __init__(self, console: Console):
        self.console = console
        self.width = max(40, console.width)

    def rows(self, texts: list[Text]) -> int:
        return sum(max(1, math.ceil(cell_len(line) / self.width))
                   for t in texts for line in t.plain.split("\n"))

    def line(self, *parts, prefix=None) -> Text:
        """parts: plain strings (student text welcome) or (string, style) pairs, wrapped at word
        boundaries (a word longer than a row is folded) into rows of at most the width, joined by
        newlines, so that `rows` counts what the terminal shows. With a prefix (a mark or INDENT,
        as a string or (string, style)), every row after the first starts under INDENT."""
        body = Text.assemble(*parts)
        under = "" if prefix is None else INDENT
        out = Text.assemble(prefix or "")
        for i, row in enumerate(body.wrap(self.console, self.width - len(under), overflow="fold")):
            row.rstrip()   # the space the row was broken at
            if i:
                out.append("\n" + under)
            out.append_text(row)
        return out


def print_terminal(report: GradeReport, console: Console | None = None, details: str | None = None,
                   page: str | None = None) -> None:
    """page: the HTML report (report.page_path), named on one line; where the lead failure has
    a picture and the screen has room, a text map of where it is wrong goes under it."""
    console = console or Console(soft_wrap=True, highlight=False)
    screen = Screen(console)
    head: list = []
    if report.device_info:
        head.append(screen.line((device_line(report.device_info), "dim")))
    if summary.target_header(report):
        head.append(screen.line((summary.target_header(report), "dim")))
        flags = summary.target_flags(report)
        for line in flags[:3]:
            head.append(screen.line(line, prefix=("TARGET ", "yellow")))
        if len(flags) > 3:
            head.append(screen.line(f"{len(flags) - 3} more: see the Markdown or JSON report",
                                    prefix=("TARGET ", "yellow")))
    grid = Table(title=Text(f"{clean(report.submission)} on {report.device}"), title_justify="left")
    for i, name in enumerate(table.header(report)):
        grid.add_column(name, justify="left" if i == 0 else "right",
                        style="bold" if name == "total" else None)
    for row in table.rows(report):
        grid.add_row(*row)

    tail = []
    not_run = summary.not_run_line(report)
    if not_run:
        tail.append(screen.line((not_run, "dim")))
    if summary.isolation(report):
        tail.append(screen.line((f"isolation: {summary.isolation(report)}", "dim")))
    if summary.seccomp(report):
        tail.append(screen.line((f"seccomp filter: {summary.seccomp(report)}", "dim")))
    tail.append(screen.line((summary.total_line(report), "bold"),
                            f"  ({report.elapsed_s:.0f} s)"))   # time per layer: in the Markdown report
    for note in report.notes:
        tail.append(screen.line((clean(note), "yellow")))
    if page:
        tail.append(screen.line((f"report page: {page} (every check; pictures of what is wrong)", "dim")))
    budget = SCREEN - len(console.render_lines(grid)) - screen.rows(head + tail)

    todo_rows = screen.rows(_todo(report, screen, 10**6))
    middle = _failures(report, screen, budget - todo_rows, details)
    middle += _advice(report, screen, budget - todo_rows - screen.rows(middle), details)
    middle += _todo(report, screen, budget - screen.rows(middle))
    middle = _with_map(report, middle, screen, budget - screen.rows(middle))
    for t in head:
        console.print(t, soft_wrap=True)
    console.print(grid)
    for t in middle + tail:
        console.print(t, soft_wrap=True)


def _with_map(report: GradeReport, middle: list[Text], screen: Screen, room: int) -> list[Text]:
    """`middle` with the lead failure's text map (pictures.text_map) under its block, where the
    lead is a failure with a picture and the map fits in the rows left over."""
    by_id = {r.check.id: r for r in report.results}
    lead = next((by_id[g["lead"]] for g in summary.failures(report)
                 if by_id[g["lead"]].status != "not_implemented"), None)
    if lead is None or lead.status not in FAILING or not lead.picture:
        return middle
    title = f"{STATUS_MARK[lead.status]} {lead.check.id} ("
    start = next((i for i, t in enumerate(middle) if t.plain.lstrip().startswith(title)), None)
    if start is None:
        return middle
    for height in (8, 6, 4, 3, 2):   # bands of rows: as many as the rows left over allow
        lines = [screen.line((line, "red" if i else "dim"), prefix=INDENT) for i, line in
                 enumerate(pictures.text_map(lead.picture, width=screen.width - 30, height=height))]
        if lines and screen.rows(lines) <= room:
            break
    else:
        return middle
    end = next((i for i in range(start + 1, len(middle)) if not middle[i].plain.startswith(INDENT)),
               len(middle))
    return middle[:end] + lines + middle[end:]


def _short(cid: str, lead: str) -> str:
    ex, _, rest = cid.partition(".")
    return rest if lead.startswith(ex + ".") else cid


def _block(r, group: list, by_id: dict, repeats: dict, screen: Screen, details: str | None,
           lines: int = 1, hint: bool = True, printed: bool = False) -> list[Text]:
    """One failure: its title, the first `lines` lines of its message (how many more there are
    under them), its hint, the first line it printed, and the checks of the same cause."""
    mark = (f"{STATUS_MARK[r.status]:>6} ", STATUS_STYLE[r.status])
    out = [screen.line(f"{r.check.id} ({fmt(r.score)}/{fmt(r.max_score)}) {r.check.title}", prefix=mark)]
    if r.check.id in repeats:
        out.append(screen.line((f"same error as {repeats[r.check.id]}", "dim"), prefix=INDENT))
    elif r.message:
        message = clean(r.message).strip().split("\n")
        out.append(screen.line("\n".join(message[:lines]), prefix=INDENT))
        if len(message) > lines:
            where = f" in {details}" if details else ""
            out.append(screen.line((f"({len(message) - lines} more lines{where})", "dim"),
                                   prefix=INDENT))
    if r.hint and hint:
        out.append(screen.line(("hint: ", "cyan"), clean(r.hint), prefix=INDENT))
    output = summary.output_of(by_id[r.check.id])
    if output and printed:
        out.append(screen.line(("printed: ", "dim"), output.strip().split("\n")[0], prefix=INDENT))
    if group:
        same = ", ".join(f"{_short(c, r.check.id)} ({fmt(by_id[c].score)}/{fmt(by_id[c].max_score)})"
                         for c in group)
        out.append(screen.line(("probably the same cause: ", "dim"), same, prefix=INDENT))
    return out


def _forms(lead: bool) -> list[dict]:
    """The ways to show a failure (arguments of _block), fullest first. The lead's message (to
    MESSAGE_LINES lines) and hint are whole; to fit, what it printed goes first, then its
    message's last lines. A later failure shows its message's first line, then not its hint."""
    if lead:
        shorter = [dict(lines=n) for n in range(MESSAGE_LINES, 0, -1)]
        return [dict(lines=MESSAGE_LINES, printed=True), *shorter]
    return [dict(lines=1), dict(lines=1, hint=False)]


def _failures(report: GradeReport, screen: Screen, budget: int, details: str | None) -> list[Text]:
    """Failure blocks, the lead first, while they fit the budget; the rest are named on one
    "also" line (all of them are in the Markdown report)."""
    by_id = {r.check.id: r for r in report.results}
    repeats = summary.repeats(report.results)
    groups = [g for g in summary.failures(report)
              if by_id[g["lead"]].status != "not_implemented"
              or any(by_id[c].status != "not_implemented" for c in g["same_cause"])]
    first = next((g for g in groups if by_id[g["lead"]].status != "not_implemented"), None)
    out: list[Text] = []
    left = list(groups)
    while left:
        g = left[0]
        lead = by_id[g["lead"]]
        if lead.status == "not_implemented":
            same = [c for c in g["same_cause"] if by_id[c].status != "not_implemented"]
            forms = [[screen.line(", ".join(same) + f": probably because {lead.check.id} is not "
                                  f"implemented yet", prefix=(f"{'FAIL':>6} ", "red"))]]
        elif lead.file_error:
            forms = [_file_block(lead, g, by_id, screen, lines)
                     for lines in ((MESSAGE_LINES, 1) if g is first else (1,))]
        else:
            forms = [_block(lead, g["same_cause"], by_id, repeats, screen, details, **f)
                     for f in _forms(g is first)]
        room = budget - screen.rows(out) - (ALSO_ROWS if len(left) > 1 else 0)
        block = next((b for b in forms if screen.rows(b) <= room), None)
        if block is None and out:
            break
        out += block or forms[-1]   # the first failure is shown whatever it takes
        left.pop(0)
    if left:
        out.append(_also(left, screen, budget - screen.rows(out), details))
    return out


def _file_block(r, group: dict, by_id: dict, screen: Screen, lines: int) -> list[Text]:
    """A file that could not be run (Result.file_error), once for its exercise, as a compiler
    says it: the message's first `lines` lines (`folder/file.py:line: Error: ...` and the
    line's code), then the checks it blocked by name; no lesson hint."""
    mark = (f"{STATUS_MARK[r.status]:>6} ", STATUS_STYLE[r.status])
    message = clean(r.message).strip().split("\n")
    out = [screen.line(message[0], prefix=mark)]
    if lines > 1 and len(message) > 1:
        out.append(screen.line("\n".join(message[1:lines]), prefix=INDENT))
    out.append(screen.line((f"it blocked {summary.blocked(group, by_id)}", "dim"), prefix=INDENT))
    return out


def _also(left: list[dict], screen: Screen, room: int, details: str | None) -> Text:
    """The failures not shown, by name, as many as fit in `room` rows, then how many more."""
    names = [g["lead"] + (f" (+{len(g['same_cause'])})" if g["same_cause"] else "") for g in left]
    where = f"; details in {details}" if details else ""
    for k in range(len(names), -1, -1):
        more = f" and {len(names) - k} more" if k < len(names) else ""
        listed = f"also: {', '.join(names[:k])}{more}" if k else f"also: {len(names)} more failures"
        line = screen.line(listed + where, prefix=(f"{'FAIL':>6} ", "red"))
        if screen.rows([line]) <= room or not k:
            return line


def _advice(report: GradeReport, screen: Screen, budget: int, details: str | None) -> list[Text]:
    """Advice checks that did not see their idea (summary.advice), after the failures: one
    line each with the message's first line and the hint while they fit, else one line naming
    them. They cost no points, and say so."""
    found = summary.advice(report)
    if not found:
        return []
    mark = (f"{STATUS_MARK['advice']:>6} ", STATUS_STYLE["advice"])
    out: list[Text] = []
    for n, r in enumerate(found):
        block = [screen.line(f"{r.check.id} (no points) {r.check.title}", prefix=mark),
                 screen.line(clean(r.message).strip().split("\n")[0], prefix=INDENT)]
        if r.hint:
            block.append(screen.line(("hint: ", "cyan"), clean(r.hint), prefix=INDENT))
        left = len(found) - n - 1
        if screen.rows(out + block) + (1 if left else 0) > budget:
            block = block[:2]
        if screen.rows(out + block) + (1 if left else 0) > budget:
            where = f"; details in {details}" if details else ""
            names = ", ".join(x.check.id for x in found[n:])
            line = screen.line(f"{names} ({summary.ADVICE_NOTE}){where}", prefix=mark)
            return out + ([line] if screen.rows(out + [line]) <= budget else [])
        out += block
    return out


def _todo(report: GradeReport, screen: Screen, budget: int) -> list[Text]:
    """Checks waiting on a stub: one line per exercise, then each TODO once (not per check)."""
    out: list[Text] = []
    entries = summary.todos(report)
    for n, (ex, count, points, items) in enumerate(entries):
        block = [screen.line(f"{ex}: {count} checks ({fmt(points)} points) wait for",
                             prefix=(f"{'TODO':>6} ", STATUS_STYLE["not_implemented"]))]
        block += [screen.line(item, prefix=INDENT) for item in items]
        if screen.rows(out + block) + (len(entries) - n - 1) > budget:
            block = block[:1]
        out += block
    return out
