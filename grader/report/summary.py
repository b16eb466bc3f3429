"""What every report says first, computed once: the labelled total, what did not run, the
failures grouped by cause, and student text made safe to show.

Student text (what the code printed, exception messages) reaches a terminal, Markdown and
Gradescope: `clean` drops the control characters that could move the cursor or colour a line;
each report escapes its own markup on top. Output printed under a hidden check is never shown.
"""

from __future__ import annotations

import re

from grader.judge.machine import target
from grader.registry import EXERCISES
from grader.results import FAILING, NOT_SELECTED, GradeReport, Result

GPU_LAYERS = ("gpu", "perf")
HIDDEN_OUTPUT = "(what the code printed under a hidden check is not shown)"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def fmt(x: float) -> str:
    return f"{round(x, 3):g}"


def clean(text: str) -> str:
    """Student text without terminal control characters (ESC, CR, BS, bidi overrides...)."""
    return _CONTROL.sub("?", str(text).replace("\r\n", "\n").replace("\t", "    "))


def output_of(r: Result) -> str:
    """What the student code printed under this check, as a report may show it."""
    if not r.output:
        return ""
    return HIDDEN_OUTPUT if r.check.hidden else clean(r.output)


def isolation(report: GradeReport) -> str:
    return getattr(report, "isolation", "") or ""


def seccomp(report: GradeReport) -> str:
    return getattr(report, "seccomp", "") or ""


def selected(report: GradeReport) -> list[Result]:
    """Results of the selected exercises (a `make check` shows its exercise only)."""
    return [r for r in report.results if r.message != NOT_SELECTED]


def exercises_shown(report: GradeReport) -> list[str]:
    names = {r.check.exercise for r in selected(report)}
    return [e for e in EXERCISES if e in names]


# ---------------------------------------------------------------------------------- total


def totals(report: GradeReport) -> dict:
    """Points by kind: public and hidden, run here, and public points of layers not run here."""
    rs = selected(report)
    public = [r for r in rs if not r.check.hidden]
    hidden = [r for r in rs if r.check.hidden]
    not_run = [r for r in public if r.status == "not_run"]
    gpu_only = all(r.check.layer in GPU_LAYERS for r in not_run)
    return {
        "score": report.score, "max_score": report.max_score,
        "public": [round(sum(r.score for r in public), 3), round(sum(r.max_score for r in public), 3)],
        "hidden": ([round(sum(r.score for r in hidden), 3), round(sum(r.max_score for r in hidden), 3)]
                   if hidden else None),
        "not_run_points": round(sum(r.check.points for r in not_run), 3),
        "not_run_on": "a GPU" if gpu_only else "machines that can run the layers not run here",
        "tracks": tracks(public),
    }


def track_of(r: Result) -> str:
    ex = EXERCISES.get(r.check.exercise)
    return getattr(ex, "track", "core") if ex else "core"


def tracks(public: list[Result]) -> dict:
    """The public points of each track counted apart (the core's 100 and the extension's own):
    {track: {"public": [score, max], "not_run_points": points}} for the tracks shown."""
    out = {}
    for r in public:
        t = out.setdefault(track_of(r), {"public": [0.0, 0.0], "not_run_points": 0.0})
        t["public"][0] += r.score
        t["public"][1] += r.max_score
        if r.status == "not_run":
            t["not_run_points"] += r.check.points
    for t in out.values():
        t["public"] = [round(x, 3) for x in t["public"]]
        t["not_run_points"] = round(t["not_run_points"], 3)
    return dict(sorted(out.items(), key=lambda kv: kv[0] != "core"))


HIDDEN_ONLY_FOR_STAFF = "hidden checks only in instructors' runs"
# the line's last part when hidden checks were counted: they run wherever hidden_tests/ is in the
# tree (the course's checkout, Gradescope, batch grading), never in the student release
HIDDEN_RAN = "instructors' checks, run here because hidden_tests/ is present"


def total_line(report: GradeReport, hidden_note: str = HIDDEN_ONLY_FOR_STAFF) -> str:
    """E.g. "Total: 0 / 76 public points on this machine; 24 more on a GPU (`make grade-gpu`);
    hidden checks only in instructors' runs". Public points come first and alone, as README
    counts them; hidden checks, where they ran, end the line apart ("hidden 3 / 17 (instructors'
    checks, run here because hidden_tests/ is present)"), else `hidden_note` does (Gradescope's
    public line says when they show instead). When the grader itself failed, the line says that
    this is not a grade."""
    if report.grading_failed:
        return (f"Not a grade: the grader failed, not your code ({report.grading_failed}); "
                f"please tell the course staff")
    t = totals(report)
    shown = exercises_shown(report)
    scope = "" if len(shown) == len(EXERCISES) else f" of {', '.join(shown)}"
    if len(t["tracks"]) > 1:
        return _tracks_line(t, scope, hidden_note)
    if t["tracks"] and "core" not in t["tracks"]:
        scope += f" ({next(iter(t['tracks']))} track)"
    line = (f"Total: {fmt(t['public'][0])} / {fmt(t['public'][1])} public points{scope} on "
            f"this machine")
    if t["not_run_points"]:
        more = f"{fmt(t['not_run_points'])} more on {t['not_run_on']}"
        line += f"; {more}" + (" (`make grade-gpu`)" if t["not_run_on"] == "a GPU" else "")
    return line + "; " + _hidden_part(t, hidden_note)


def _hidden_part(t: dict, hidden_note: str) -> str:
    if not t["hidden"]:
        return hidden_note
    hs, hm = t["hidden"]
    return f"hidden {fmt(hs)} / {fmt(hm)} ({HIDDEN_RAN})"


def _tracks_line(t: dict, scope: str, hidden_note: str) -> str:
    """Core and extension counted apart, e.g. "Total: core 76 / 76 public points on this machine,
    24 more on a GPU; extension 29 / 29, 11 more on a GPU (`make grade-gpu`); hidden checks
    only in instructors' runs"."""
    parts = []
    for i, (name, tr) in enumerate(t["tracks"].items()):
        s, m = tr["public"]
        part = f"{name} {fmt(s)} / {fmt(m)}" + (" public points on this machine" if i == 0 else "")
        if tr["not_run_points"]:
            part += f", {fmt(tr['not_run_points'])} more on {t['not_run_on']}"
        parts.append(part)
    line = "Total" + (scope and f"{scope}") + ": " + "; ".join(parts)
    if t["not_run_points"] and t["not_run_on"] == "a GPU":
        line += " (`make grade-gpu`)"
    return line + "; " + _hidden_part(t, hidden_note)


def not_run_line(report: GradeReport) -> str:
    """Layers and exercises left out, in one line: layers with the same reason share it."""
    by_reason: dict[str, list[str]] = {}
    for layer, reason in report.layers_not_run.items():
        by_reason.setdefault(reason, []).append(layer)
    parts = []
    for reason, layers in by_reason.items():
        if reason == "not selected" and set(layers) <= set(GPU_LAYERS):
            reason = "not selected; `make grade-gpu` runs them"
        parts.append(f"{', '.join(layers)} ({reason})")
    skipped = [e for e in EXERCISES if e not in exercises_shown(report)]
    if skipped and exercises_shown(report):
        parts.append(f"exercises {', '.join(skipped)} (not selected)")
    return ("not run: " + "; ".join(parts)) if parts else ""


# ------------------------------------------------------------------------------- failures


def failures(report: GradeReport) -> list[dict]:
    """Failing checks grouped by cause: [{"lead": id, "same_cause": [ids]}], in report order.

    A failing check whose `Check.follows` names another failing check goes under that check's
    lead ("probably the same cause"). Within an exercise, the lead that explains the most
    failures comes first, then registry order; each exercise's first lead comes before any
    exercise's second, so two mistakes in two exercises both show at the top. With no `follows`
    at all, failures lead by themselves in registry order (one exercise at a time).

    An exercise whose file could not be run (Result.file_error: missing, refused by the audit,
    failed at import) is one group, before every other: its first check leads, the checks it
    blocked follow."""
    blocked: dict[str, list[str]] = {}
    for r in report.results:
        if r.status in FAILING and r.file_error:
            blocked.setdefault(r.check.exercise, []).append(r.check.id)
    files = [{"lead": ids[0], "same_cause": ids[1:]} for ids in blocked.values()]
    failing = {r.check.id: r for r in report.results if r.status in FAILING and not r.file_error}
    order = [r.check.id for r in report.results if r.check.id in failing]

    def next_of(cid: str) -> tuple[str | None, bool]:
        """The failing check cid follows, and whether its own failure said so (evidence)."""
        own = getattr(failing[cid], "failure_follows", None)
        follows = own if own is not None else getattr(failing[cid].check, "follows", ())
        for other in follows or ():
            if other in failing and other != cid and not getattr(failing[other], "secondary", False) \
                    and not _advice(failing[other]):
                return other, own is not None
        if getattr(failing[cid], "secondary", False):   # under what its hint names
            explained = report.explained_by(failing[cid])
            if explained:
                return explained[0], True
        return None, False

    def lead_of(cid: str) -> str:
        """The end of cid's chain of follows. A chain that closes on itself (a failure's own
        evidence says A follows B, the registry says B follows A) is led by the first of its
        checks whose link is only the registry's guess, so the evidence wins; else the first."""
        path = [cid]
        while True:
            nxt, _ = next_of(path[-1])
            if nxt is None:
                return path[-1]
            if nxt in path:
                loop = sorted(path[path.index(nxt):], key=order.index)
                guessed = [c for c in loop if not next_of(c)[1]]
                return (guessed or loop)[0]
            path.append(nxt)

    leads = {cid: lead_of(cid) for cid in order}
    # an advice check (a secondary failure of one: its answer was wrong) never leads: where no
    # failure of its exercise explains it, it is left out (it costs nothing; the Markdown has it)
    same = {cid: [c for c in order if c != cid and leads[c] == cid] for cid in order
            if leads[cid] == cid and not _advice(failing[cid])}
    # within an exercise, the lead that explains most failures first, then registry order
    per_exercise: dict[str, list[str]] = {}
    for cid in sorted(same, key=lambda c: (-len(same[c]), order.index(c))):
        per_exercise.setdefault(failing[cid].check.exercise, []).append(cid)
    exercises = list(EXERCISES)
    heads = sorted(same, key=lambda c: (per_exercise[failing[c].check.exercise].index(c),
                                        exercises.index(failing[c].check.exercise)
                                        if failing[c].check.exercise in exercises else len(exercises)))
    return files + [{"lead": cid, "same_cause": same[cid]} for cid in heads]


def _advice(r: Result) -> bool:
    return bool(getattr(r.check, "advice", False))


def blocked(group: dict, by_id: dict) -> str:
    """The checks a file error (Result.file_error) blocked, by name only: "online_softmax's 12
    checks (19 points): safe_matches_float64, online_max_sum, ..."."""
    ids = [group["lead"], *group["same_cause"]]
    ex = by_id[ids[0]].check.exercise
    names = ", ".join(c.partition(".")[2] or c for c in ids)
    public = sum(by_id[c].max_score for c in ids if not by_id[c].check.hidden)
    hidden = sum(by_id[c].max_score for c in ids if by_id[c].check.hidden)
    points = f"{fmt(public)} points" + (f" + {fmt(hidden)} hidden" if hidden else "")
    return f"{ex}'s {len(ids)} checks ({points}): {names}"


def advice(report: GradeReport) -> list[Result]:
    """The advice checks (Check.advice) whose idea this run did not see, in report order: each
    teaches without paying (its only evidence is a record the student's process could rewrite),
    so it is listed apart from the failures, after them, and never leads."""
    return [r for r in selected(report) if r.status == "advice"]


ADVICE_NOTE = "advice, no points: the grader cannot check this idea from outside your code"


def repeats(results: list[Result]) -> dict[str, str]:
    """check id -> the earlier check with the same long message (a traceback shown once)."""
    first: dict[str, str] = {}
    same = {}
    for r in results:
        msg = r.message.strip()
        if r.status not in (*FAILING, "advice") or (msg.count("\n") < 2 and len(msg) < 300):
            continue
        key = msg.split("\n", 1)[1] if msg.count("\n") >= 2 else msg   # body: the traceback
        if key in first:
            same[r.check.id] = first[key]
        else:
            first[key] = r.check.id
    return same


def todos(report: GradeReport) -> list[tuple[str, int, float, list[str]]]:
    """Per exercise with stubs left: (exercise, public checks waiting, their points, each TODO
    once). Hidden checks waiting are in the table's hidden column, not counted here: the points
    are README's."""
    out = []
    for ex in EXERCISES:
        rs = [r for r in report.results if r.check.exercise == ex and r.status == "not_implemented"]
        if rs:
            items = list(dict.fromkeys(clean(r.message.split(" is not implemented yet: ", 1)[-1])
                                       for r in rs))
            public = [r for r in rs if not r.check.hidden]
            out.append((ex, len(public), sum(r.max_score for r in public), items))
    return out


# ---------------------------------------------------------------------------------- target


def target_of(report: GradeReport) -> dict:
    """report.target (grader.judge.machine.target.Evidence.to_dict), {} without a grading target."""
    t = getattr(report, "target", None)
    return t if isinstance(t, dict) and t.get("arch") else {}


def target_header(report: GradeReport) -> str:
    """"target GB10 (sm_121): resources checked from compiled metadata; speed was measured on
    <this device>, not on the target", plus what was found; "" without a target."""
    t = target_of(report)
    if not t:
        return ""
    line = clean(t.get("header") or "")
    kernels, over = t.get("kernels") or [], t.get("over_limit") or []
    if not kernels:
        line += ("; no Triton kernel was compiled for it in this run (it is checked on CUDA, in "
                 "the gpu and perf layers)")
    elif over:
        line += (f"; {len(over)} of {len(kernels)} kernels need more than its "
                 f"{t.get('smem_per_block')} bytes of shared memory per block")
    else:
        line += (f"; all {len(kernels)} kernels fit its {t.get('smem_per_block')} bytes of shared "
                 f"memory per block")
    return line


def target_flags(report: GradeReport) -> list[str]:
    """One line per kernel that would not fit the target (student text cleaned), then one for
    the autotuner configs it would skip, and one for kernels that could not be compiled."""
    t = target_of(report)
    if not t:
        return []
    lines = [clean(target.flag_line(e, t)) for e in t.get("over_limit") or []]
    skipped = t.get("autotune_skipped") or []
    if skipped:
        lines.append(clean(f"{len(skipped)} autotuner configs need more than {t.get('short')}'s "
                           f"shared memory ({', '.join(target.describe_kernel(e) for e in skipped[:3])}"
                           f"{' ...' if len(skipped) > 3 else ''}): its autotuner would skip them, "
                           f"another config fits"))
    failed = [e for e in t.get("kernels") or [] if e.get("shared") is None]
    if failed:
        lines.append(clean(f"{len(failed)} kernels could not be compiled for sm_{t.get('arch')} "
                           f"here, so they were not checked: {target.describe_kernel(failed[0])}: "
                           f"{failed[0].get('error') or 'no record'}"))
    return lines
