"""No verdict rests on anything the student's process wrote, except its answer (issue 53).

docs/SECURITY.md ("What a verdict may rest on") says where each check's evidence comes from, in
a table tools.evidence writes from the registry: here it stays equal to the registry, every
check in it. Advice checks (Check.advice) pay nothing and show as advice in every report; the
evidence a verdict needs fails the check when it is missing or malformed. The attacks are in
the corpus (tests/exercises/*/cheats/, graded by tests/test_cheats.py): read logs rewritten
through gc or vars(module), tracemalloc stopped, reset or rebound, a bounds record emptied or a
`bounds` module planted in sys.modules.
"""

from __future__ import annotations

import json
import re

import pytest

from grader.exercises.attention_backward.judging import reads_per_row
from grader.exercises.online_softmax.judging import read_log
from grader.exercises.tiled_attention.judging import key_tiles, one_pass_over_keys, reads_of
from grader.judge.answers.compare import CheckFailed
from grader.registry import CHECKS, all_checks
from grader.report import formats, markdown, summary
from grader.report.terminal import print_terminal
from grader.results import GradeReport, Result
from grader.sandbox import memory
from grader.sandbox.proxy import CallResult
from tests.helpers import ROOT
from tools import evidence

SECURITY = ROOT / "docs" / "SECURITY.md"


def _table() -> str:
    text = SECURITY.read_text()
    return text.split("<!-- evidence -->\n")[1].split("\n<!-- /evidence -->")[0]


def test_every_check_is_in_the_evidence_table():
    ids = re.findall(r"^\| `([^`]+)` \|", _table(), re.M)
    assert sorted(ids) == sorted(all_checks(include_hidden=True)), (
        "docs/SECURITY.md's evidence table and the registry differ: write it again with "
        "`python -m tools.evidence`")
    assert _table() == evidence.table(), "write the table again: python -m tools.evidence"


def test_advice_checks_pay_nothing_and_say_so():
    advice = [c for c in CHECKS if c.advice]
    assert {c.id for c in advice} >= {"online_softmax.one_pass", "tiled_attention.key_tiles",
                                      "tiled_attention.one_pass_over_keys",
                                      "attention_backward.causal_skips_blocks"}
    assert all(c.points == 0 for c in advice)
    assert all(evidence.evidence(c) == evidence.ADVICE for c in advice)


def _report(results) -> GradeReport:
    return GradeReport("sub", "cpu", results, 1.0, ["cpu"], {})


def test_a_failed_advice_check_is_advice_in_every_report(capsys):
    checks = all_checks()
    advice = Result(checks["online_softmax.one_pass"], "failed", 2.0,
                    "online_max_sum(x): expected one pass over x, got 2", failure_hint="one pass")
    lost = Result(checks["online_softmax.merge_chunks"], "failed", 0.0, "merge: wrong l")
    rest = [Result(c, "passed", c.points) for c in CHECKS
            if c.exercise == "online_softmax" and c.id not in (advice.check.id, lost.check.id)]
    report = _report([advice, lost, *rest])
    assert (advice.status, advice.score, advice.max_score) == ("advice", 0.0, 0)
    assert advice.message.startswith("advice, no points: ")
    # never a failure, never a lead, never a point
    assert summary.failures(report) == [{"lead": "online_softmax.merge_chunks", "same_cause": []}]
    assert report.score == sum(r.score for r in rest)
    data = formats.to_json(report)
    assert data["advice"] == ["online_softmax.one_pass"]
    shown = next(t for t in data["tests"] if t["name"] == "online_softmax.one_pass")
    assert shown["status"] == "advice" and shown["advice"] is True
    gradescope = next(t for t in formats.to_gradescope(report)["tests"]
                      if t["number"] == "online_softmax.one_pass")
    assert gradescope["output"].startswith("[advice, no points]") and gradescope["max_score"] == 0
    text = markdown.to_markdown(report)
    assert "## Advice (no points)" in text and "ADVICE `online_softmax.one_pass`" in text
    print_terminal(report)
    out = capsys.readouterr().out
    assert "ADVICE online_softmax.one_pass (no points)" in out
    assert out.index("merge_chunks") < out.index("ADVICE")   # after the failures
    json.dumps(data)


def test_advice_on_a_wrong_answer_is_the_correctness_checks_business():
    """A secondary failure (the advice check's own call answered wrong) is no advice: a failure
    worth 0, under the correctness check that failed, and never a lead on its own."""
    checks = all_checks()
    secondary = Result(checks["tiled_attention.key_tiles"], "failed", 0.0,
                       "The answer was wrong: ...", secondary=True)
    lead = Result(checks["tiled_attention.tiled_matches_float64"], "failed", 0.0, "wrong")
    assert secondary.status == "failed" and secondary.max_score == 0
    assert summary.failures(_report([lead, secondary])) == [
        {"lead": "tiled_attention.tiled_matches_float64", "same_cause": ["tiled_attention.key_tiles"]}]
    alone = Result(checks["tiled_attention.key_tiles"], "failed", 0.0, "The answer was wrong", secondary=True)
    assert summary.failures(_report([alone])) == []


def test_a_stub_or_a_file_error_stays_what_it_is():
    check = all_checks()["online_softmax.one_pass"]
    assert Result(check, "not_implemented", 0.0, "TODO").status == "not_implemented"
    assert Result(check, "error", 0.0, "no file", file_error=True).status == "error"
    assert Result(check, "error", 0.0, "grader", grader_error=True).status == "error"


@pytest.mark.parametrize("extras", [{}, {"reads": None}, {"reads": []}, {"reads": [{}]},
                                    {"reads": [{"passes": True}]}, {"reads": [{"passes": "1"}]},
                                    {"reads": [{"passes": 1}, {"passes": 1}]}])
def test_a_missing_one_pass_log_fails_closed(extras):
    with pytest.raises(CheckFailed, match="evidence was missing"):
        read_log(extras, "online_max_sum(x)")


@pytest.mark.parametrize("reads", [None, [], [{"name": "K", "widest_rows": 4, "passes": 1}],
                                   [{"name": "K", "widest_rows": "4", "passes": 1},
                                    {"name": "V", "widest_rows": 4, "passes": 1}]])
def test_a_missing_tile_log_fails_closed(reads):
    res = CallResult(None, extras={} if reads is None else {"reads": reads})
    for judge in (lambda: reads_of(res, "tiled_attention(Q, K, V)", "N=8", 1),
                  lambda: key_tiles(res, 8, 4, "tiled_attention(Q, K, V)", "N=8", 1),
                  lambda: one_pass_over_keys(res, "tiled_attention(Q, K, V)", "N=8", 1)):
        with pytest.raises(CheckFailed, match="evidence was missing"):
            judge()


@pytest.mark.parametrize("log", [{}, {"n": 8, "ranges": [[1, 0]]}, {"n": 8, "ranges": [[1, 0, 9]]},
                                 {"n": "8", "ranges": []}, {"n": 8, "ranges": [[1, "0", 4]]}])
def test_a_malformed_causal_log_fails_closed(log):
    with pytest.raises(CheckFailed, match="evidence was missing"):
        reads_per_row(log)


def test_tracemalloc_only_explains():
    """tracemalloc's numbers come from the student's process: words for a message, never a
    verdict (memory.traced); where no outside count exists, the memory checks say so."""
    assert "saw 1024 bytes" in memory.traced({"peak_bytes": 1024})
    assert "switched off" in memory.traced({"peak_bytes": 1, "tracemalloc_tampered": "stopped"})
    assert "nothing" in memory.traced({"peak_bytes": "1"})
    assert "fails closed" in memory.UNMEASURED


def test_the_worker_imports_bounds_before_student_code():
    """An entry planted in sys.modules later replaces nothing: probes holds the module."""
    source = (ROOT / "grader" / "worker" / "probes.py").read_text()
    head = source.split("\ndef ", 1)[0]
    assert re.search(r"^from grader\.worker import .*\bbounds\b", head, re.M), head
    assert "import bounds" not in source.split("\ndef ", 1)[1]
