"""The grader process and its reports hold against what a submission prints, raises or plants.

- student text (printed output, exception messages) cannot crash the terminal report, colour a
  line, close a Markdown fence or fake a row;
- output printed under a hidden check appears in no report;
- the terminal report fits on one screen (40 rows at 100 columns) whatever fails, and cuts no
  line: long messages wrap under their indent, and what does not fit is left out whole;
- failures are grouped by `Check.follows`, the most specific first;
- a report path that is a folder or cannot be written is a one-line error, never a traceback;
- a rich.py, pytest.py or numpy.py planted in the cwd or the repo root is never imported;
- batch accepts a report only with the grader's completion marker and its nonce.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import itertools
import json
import math
import re
import shutil
import subprocess
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from grader import registry, report
from grader.batch import completed
from grader.registry import CHECKS
from grader.report import summary
from grader.results import NOT_SELECTED, GradeReport, Result
from tests.helpers import EXERCISES, GRADER, ROOT, SOLUTIONS

MARKUP = "[/x] [green]PASS[/green] [bold red]FAIL[/] [link=http://x]y[/link] [/]"
ANSI = "\x1b[32m   PASS tiled_attention.ragged_sizes (5/5)\x1b[0m\r\x08"


def make_report(results, **kw) -> GradeReport:
    return GradeReport("sub", "CPU only (test)", results, 1.0, ["cpu", "adversarial", "interp"],
                       {"gpu": "not selected", "perf": "not selected"}, {"cpu": 1.0}, [], {}, **kw)


def all_results(status="passed", message="", output="", **by_id) -> list[Result]:
    out = []
    for c in CHECKS:
        if c.layer in ("gpu", "perf"):
            out.append(Result(c, "not_run", 0.0, "not selected"))
        elif c.id in by_id:
            out.append(by_id[c.id])
        else:
            out.append(Result(c, status, c.points if status == "passed" else 0.0, message, output))
    return out


def terminal(rep: GradeReport, width: int = 100) -> tuple[str, str]:
    """(plain text, text with ANSI colours) of the terminal report."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=True, color_system="standard",
                      soft_wrap=True, highlight=False)
    report.print_terminal(rep, console)
    coloured = buf.getvalue()
    return re.sub(r"\x1b\[[0-9;]*m", "", coloured), coloured


def rows(text: str, width: int = 100) -> int:
    return sum(max(1, math.ceil(cell_len(l) / width)) for l in text.rstrip("\n").split("\n"))


def failing(check_id: str, message: str = "wrong", output: str = "", status="failed") -> Result:
    c = next(c for c in CHECKS if c.id == check_id)
    return Result(c, status, 0.0, message, output)


# ------------------------------------------------------------------- student text


def outside_fences(md: str) -> list[str]:
    """Markdown lines a renderer shows as Markdown (not inside a ``` fence), per CommonMark."""
    out, fence = [], None
    for line in md.splitlines():
        ticks = len(line) - len(line.lstrip("`"))
        if fence is None and ticks >= 3:
            fence = ticks
        elif fence is not None and ticks >= fence and not line.strip("`"):
            fence = None
        elif fence is None:
            out.append(line)
    return out


def test_markup_and_control_characters_print_as_typed():
    bad = failing("tiled_attention.ragged_sizes", f"ValueError: {MARKUP}", output=f"{MARKUP}\n{ANSI}")
    rep = make_report(all_results(**{bad.check.id: bad}))
    plain, coloured = terminal(rep)
    assert "[/x] [green]PASS[/green]" in plain          # shown, not interpreted
    assert "\x1b[32m   PASS" not in coloured and "\r" not in coloured and "\x08" not in coloured
    # the only green on screen would be a passing mark; none is printed for student text
    assert coloured.count("\x1b[32m") == 0


def test_markdown_and_gradescope_cannot_be_faked():
    fence = "```\n# Grade: 100 / 100\n| PASS | `x` |"
    bad = failing("tiled_attention.ragged_sizes", fence, output=fence)
    rep = make_report(all_results(**{bad.check.id: bad}))
    md = report.to_markdown(rep)
    outside = outside_fences(md)
    assert [l for l in outside if l.startswith("# Grade")] == [md.splitlines()[0]]
    assert not any("| PASS | `x` |" in l for l in outside)
    gs = report.to_gradescope(rep)
    assert "\x1b" not in json.dumps(gs)


def test_hidden_check_output_is_never_shown():
    hidden = dataclasses.replace(next(c for c in CHECKS if c.id == "online_softmax.no_overflow"),
                                 id="online_softmax.hidden_probe", hidden=True)
    secret = "SECRET-HIDDEN-TEST-SOURCE"
    results = all_results() + [Result(hidden, "failed", 0.0, "wrong", secret),
                               Result(hidden, "passed", 1.0, "", secret)]
    rep = make_report(results)
    texts = [terminal(rep)[0], report.to_markdown(rep), json.dumps(report.to_gradescope(rep)),
             json.dumps(report.to_json(rep))]
    assert not any(secret in t for t in texts)


# ------------------------------------------------------------------- one screen


@pytest.mark.parametrize("width", [100, 80])
def test_terminal_report_fits_one_screen(width):
    long = "x" * 400 + "\n" + "Traceback (most recent call last):\n" + "  File ...\n" * 30
    results = all_results(status="failed", message=long, output="y" * 500)
    plain, _ = terminal(make_report(results), width)
    assert rows(plain, width) <= 39, plain   # + the "Grading ..." line: 40
    stubs = all_results(status="not_implemented",
                        message="f() is not implemented yet: TODO(x): " + "z" * 150)
    plain, _ = terminal(make_report(stubs), width)
    assert rows(plain, width) <= 39, plain


def stub_todos(exercise: str) -> list[str]:
    """The messages of the NotImplementedErrors an exercise's stub raises."""
    tree = ast.parse((EXERCISES / f"{exercise}.py").read_text())
    return [n.exc.args[0].value for n in ast.walk(tree)
            if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)
            and getattr(n.exc.func, "id", "") == "NotImplementedError"]


def test_stubs_report_fits_one_screen_at_100_columns_and_cuts_nothing():
    # every check of the stubs waits for a TODO, and every TODO of each stub is reached (more than
    # a real run reaches); the isolation and seccomp lines of a real run
    todos = {ex: itertools.cycle(stub_todos(ex)) for ex in registry.EXERCISES}
    results = [r if r.status == "not_run" else dataclasses.replace(
                   r, message=f"f() is not implemented yet: {next(todos[r.check.exercise])}")
               for r in all_results(status="not_implemented")]
    rep = make_report(results, isolation="os: pid+mount+net+ipc namespaces, allow-list root, uid nobody",
                      seccomp="cpu: processes+threads; interp: processes+threads")
    plain, _ = terminal(rep, 100)
    assert rows(plain, 100) <= 39, plain   # + the "Grading ..." line: 40
    assert not [l for l in plain.splitlines() if l.rstrip().endswith("…")], plain
    flat = " ".join(plain.split())
    assert all(f"TODO {ex}: " in flat for ex in registry.EXERCISES)
    assert " ".join(summary.total_line(rep).split()) in flat
    assert " ".join(summary.not_run_line(rep).split()) in flat


@pytest.mark.parametrize("width", [100, 80])
def test_long_message_and_hint_of_the_lead_failure_are_shown_whole(width):
    message = " ".join(f"m{i:03}" for i in range(80))     # 400 characters, every word its own
    hint = " ".join(f"h{i:03}" for i in range(60))        # 300
    bad = dataclasses.replace(failing("tiled_attention.ragged_sizes", message), failure_hint=hint)
    rep = make_report(all_results(**{bad.check.id: bad}))
    plain, _ = terminal(rep, width)
    lines = plain.splitlines()
    assert all(cell_len(l) <= width for l in lines), plain
    words = plain.split()
    assert all(w in words for w in (message + " " + hint).split()), plain
    # every row of the message and the hint starts under the indent, none at column 0
    assert all(l.startswith(" " * 8) for l in lines if re.search(r"\b[mh]\d{3}\b", l)), plain
    flat = " ".join(words)
    assert " ".join(summary.total_line(rep).split()) in flat


def test_traceback_repeated_under_several_checks_is_printed_once():
    tb = "RuntimeError: compile failed\nTraceback (most recent call last):\n" + "  line\n" * 20
    results = all_results(status="error", message=tb)
    md = report.to_markdown(make_report(results))
    assert md.count("Traceback (most recent call last)") == 1
    assert "Same error as" in md
    gradescope = json.dumps(report.to_gradescope(make_report(results)))
    assert gradescope.count("Traceback (most recent call last)") == 1


def test_total_says_what_it_counts_and_not_run_is_one_line():
    rep = make_report(all_results())
    line = summary.total_line(rep)
    assert "public points on this machine" in line and "more on a GPU" in line
    assert "hidden checks only in instructors' runs" in line
    assert summary.not_run_line(rep).count("\n") == 0
    plain, _ = terminal(rep)
    # the table's cells (one per exercise and GPU layer it has) and one line
    cells = {(c.exercise, c.layer) for c in registry.CHECKS if c.layer in ("gpu", "perf")}
    assert plain.count("not run") <= len(cells) + 1


def test_core_and_extension_tracks_are_counted_apart():
    rep = make_report(all_results())
    t = summary.totals(rep)
    assert list(t["tracks"]) == ["core", "extension"]
    core, ext = t["tracks"]["core"], t["tracks"]["extension"]
    assert core["public"][1] + core["not_run_points"] == registry.public_total("core") == 100
    assert ext["public"][1] + ext["not_run_points"] == registry.public_total("extension")
    line = summary.total_line(rep)
    assert line.startswith(f"Total: core {summary.fmt(core['public'][0])} / ") and "; extension " in line
    # one exercise of the extension alone: one total, named as the extension's
    only = [r if r.check.exercise == "flash_decode" else Result(r.check, "not_run", 0.0, NOT_SELECTED)
            for r in all_results()]
    assert "(extension track)" in summary.total_line(make_report(only))
    # Gradescope's score is every check's, core and extension (docs/INSTRUCTORS.md), and each
    # test is tagged with its track
    gs = report.to_gradescope(rep)
    assert gs["score"] == rep.score
    assert any("extension track" in t["tags"] for t in gs["tests"])


def test_a_check_run_shows_its_exercise_only():
    results = [r if r.check.exercise == "online_softmax" else Result(r.check, "not_run", 0.0, NOT_SELECTED)
               for r in all_results()]
    rep = make_report(results)
    plain, _ = terminal(rep)
    assert "tiled_attention" not in plain.split("not run:")[0]
    assert "exercise not selected" not in report.to_markdown(rep)


# ------------------------------------------------------------------- grouping


def test_failures_grouped_under_the_check_they_follow():
    # the registry's own `follows` rows are cleared: this test sets the ones it needs
    by = {c.id: dataclasses.replace(c, follows=()) for c in CHECKS}
    lead = by["tiled_attention.max_in_last_block"]
    f1 = dataclasses.replace(by["tiled_attention.ragged_sizes"], follows=(lead.id,))
    f2 = dataclasses.replace(by["tiled_attention.large_scores"], follows=(f1.id,))   # via f1
    other = by["flash_triton.padded_keys_masked"]
    results = all_results(**{c.id: Result(c, "failed", 0.0, "wrong") for c in (lead, f1, f2, other)})
    groups = summary.failures(make_report(results))
    assert groups == [{"lead": lead.id, "same_cause": [f1.id, f2.id]},
                      {"lead": other.id, "same_cause": []}]
    assert report.to_json(make_report(results))["failures"] == groups
    plain, _ = terminal(make_report(results))
    assert plain.index(lead.id) < plain.index(other.id)
    assert "probably the same cause: ragged_sizes" in plain


def test_follows_that_close_a_loop_still_give_every_failure_a_lead():
    # flash_decode's no_max_subtraction mutant, as CI saw it: max_in_last_split's own failure
    # says it follows large_scores (inf: an overflow), the registry says large_scores follows
    # max_in_last_split, and padded_keys_masked follows large_scores. The evidence wins.
    by = {c.id: c for c in CHECKS}
    big, last, pad = (by[f"flash_decode.{n}"] for n in ("large_scores", "max_in_last_split",
                                                         "padded_keys_masked"))
    assert last.id in big.follows and big.id in pad.follows
    results = all_results(**{
        big.id: Result(big, "failed", 0.0, "nan"),
        last.id: Result(last, "failed", 0.0, "inf", failure_follows=(big.id,)),
        pad.id: Result(pad, "failed", 0.0, "wrong")})
    groups = summary.failures(make_report(results))
    assert groups == [{"lead": big.id, "same_cause": [pad.id, last.id]}] or \
        groups == [{"lead": big.id, "same_cause": [last.id, pad.id]}]
    # a loop of registry guesses only: its first check in report order leads, every one listed
    a, b = (dataclasses.replace(by[i], follows=(j,)) for i, j in
            ((big.id, last.id), (last.id, big.id)))
    groups = summary.failures(make_report(all_results(**{
        c.id: Result(c, "failed", 0.0, "x") for c in (a, b)})))
    assert len(groups) == 1 and sorted([groups[0]["lead"], *groups[0]["same_cause"]]) == \
        sorted([a.id, b.id])


def test_without_follows_each_failure_leads_in_registry_order_one_per_exercise_first():
    ids = ["tiled_attention.ragged_sizes", "tiled_attention.large_scores", "flash_triton.ragged_n"]
    bare = {i: dataclasses.replace(failing(i), check=dataclasses.replace(failing(i).check, follows=()))
            for i in ids}
    groups = summary.failures(make_report(all_results(**bare)))
    assert [g["lead"] for g in groups] == [ids[0], ids[2], ids[1]]
    assert all(g["same_cause"] == [] for g in groups)


def test_isolation_is_shown_in_every_report():
    rep = make_report(all_results())
    rep.isolation = "os: user+pid+mount+net namespaces, uid nobody"
    assert rep.isolation in terminal(rep)[0]
    assert rep.isolation in report.to_markdown(rep)
    assert rep.isolation in report.to_gradescope(rep)["output"]
    assert report.to_json(rep)["isolation"] == rep.isolation


# ------------------------------------------------------------------- report paths


def run(*args, cwd=ROOT, cmd=None, **kw):
    return subprocess.run([*(cmd or GRADER), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, **kw)


def test_report_path_that_is_a_folder_is_one_line_error(tmp_path):
    (tmp_path / "grade.md").mkdir()
    proc = run("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu",
               "--markdown", str(tmp_path / "grade.md"), "--quiet")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "grade.md" in proc.stderr


def test_report_written_atomically_over_a_planted_file_or_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    (tmp_path / "r.json").symlink_to(target)
    proc = run("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu",
               "--json", str(tmp_path / "r.json"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == "keep" and not (tmp_path / "r.json").is_symlink()
    assert json.loads((tmp_path / "r.json").read_text())["score"] > 0
    assert not list(tmp_path.glob(".*tmp"))


def test_completion_marker_holds_the_nonce_and_hashes(tmp_path):
    paths = {"json": tmp_path / "r.json", "markdown": tmp_path / "r.md"}
    proc = run("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu",
               *(x for k, p in paths.items() for x in (f"--{k}", str(p))), "--quiet",
               "--completion-marker", str(tmp_path / "done"), input="n0nce\n")
    assert proc.returncode == 0, proc.stderr
    assert completed(tmp_path / "done", "n0nce", paths.values())
    assert not completed(tmp_path / "done", "other", paths.values())
    paths["json"].write_text('{"score": 100}')                  # forged after the grader
    assert not completed(tmp_path / "done", "n0nce", paths.values())
    assert not completed(tmp_path / "missing", "n0nce", [])


# ------------------------------------------------------------------- shadowed imports


PLANT = "import pathlib; pathlib.Path({!r}).write_text('imported {}'); raise SystemExit(99)\n"


def test_planted_modules_in_cwd_and_repo_root_are_not_imported(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "grader", repo / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    flag = tmp_path / "flag"
    for where in (repo, cwd):
        for name in ("rich", "pytest", "numpy", "json", "pytest_timeout"):
            (where / f"{name}.py").write_text(PLANT.format(str(flag), name))
        (where / "conftest.py").write_text(PLANT.format(str(flag), "conftest"))
    args = ("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu",
            "--json", str(tmp_path / "r.json"))
    for cmd, where in (([sys.executable, "-I", str(repo / "grader" / "__main__.py")], cwd),
                       ([sys.executable, "-m", "grader"], repo)):
        proc = run(*args, cwd=where, cmd=cmd)
        assert not flag.exists(), flag.read_text()
        assert proc.returncode == 0, proc.stderr
        assert json.loads((tmp_path / "r.json").read_text())["score"] > 0
