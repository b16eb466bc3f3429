"""A submission that crashes, hangs, exits, fails to import, eats memory or cheats costs only
its own exercise; the report is always written and adds up."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, by_id, copy_solutions, grade

CORPUS = ROOT / "tests" / "submissions"
ARGS = ("--exercises", "online_softmax,tiled_attention", "--layers", "cpu,adversarial", "--no-hidden")

# fault → (statuses its online_softmax checks may get, words the first one's message must contain)
FAULTS = {
    "segfault": ({"crashed"}, "SIGSEGV"),
    "os_exit": ({"crashed"}, "exited with status 0"),
    "sys_exit": ({"error", "failed"}, "sys.exit(3)"),
    "hang": ({"timeout"}, "did not finish"),
    "syntax_error": ({"error", "failed"}, "SyntaxError"),
    "import_error": ({"error", "failed"}, "configuration file not found"),
    "runaway_alloc": ({"error", "crashed", "failed"}, "Memory"),
    "monkeypatch": ({"failed"}, "expected"),
}
# faults the static audit (grader.judge.source.audit) refuses before any of the file runs → the
# construct it must name, with the file and line; the others it must let through to run
AUDITED = {
    "segfault": "online_softmax.py:2: import ctypes",
    "os_exit": "online_softmax.py:6: os._exit",
    "monkeypatch": "online_softmax.py:2: import builtins",
}


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch):
    monkeypatch.setenv("GRADER_TIMEOUT_SCALE", "0.1")   # 3 s per NumPy call instead of 30


def assert_consistent(report: dict) -> None:
    assert report["score"] == pytest.approx(sum(t["score"] for t in report["tests"]))
    assert report["max_score"] == pytest.approx(sum(t["max_score"] for t in report["tests"]))
    for t in report["tests"]:
        assert t["status"] in {"passed", "failed", "error", "timeout", "crashed", "not_implemented", "not_run",
                               "advice"}
        assert "grader error" not in t["message"], t


def assert_costs_only_its_exercise(report: dict, statuses: set, words: str) -> None:
    """Every online_softmax check scores 0 and is not passed, the first one's message names the
    fault, every tiled_attention check passes, and the report adds up."""
    assert_consistent(report)
    online = [t for t in report["tests"] if t["exercise"] == "online_softmax"]
    tiled = [t for t in report["tests"] if t["exercise"] == "tiled_attention"]
    assert online and tiled
    for t in online:
        assert t["score"] == 0 and t["status"] != "passed", t
        # an advice check (one_pass) that the fault stops reads "advice", worth 0 like the rest
        assert t["status"] in statuses | {"advice"}, (t["name"], t["status"], t["message"])
    assert words in online[0]["message"], online[0]["message"]
    for t in tiled:
        assert t["status"] == "passed", t
    assert report["score"] == sum(t["max_score"] for t in tiled)


def faulty(fault: str, tmp_path) -> Path:
    sub = copy_solutions(tmp_path / "sub")
    shutil.copy(CORPUS / fault / "online_softmax.py", sub / "online_softmax.py")
    return sub


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_costs_only_its_exercise(fault, tmp_path):
    """As graded for real: the audit refuses what it must, naming the construct and its line,
    and lets the rest run into the launcher's defences, whose message names the fault."""
    report = grade(faulty(fault, tmp_path), *ARGS)
    if fault in AUDITED:
        words = AUDITED[fault]
        assert_costs_only_its_exercise(report, {"failed"}, words)
        assert "audit" in report["tests"][0]["message"]
    else:
        statuses, words = FAULTS[fault]
        assert_costs_only_its_exercise(report, statuses, words)
        online = [t for t in report["tests"] if t["exercise"] == "online_softmax"]
        assert not any("audit" in t["message"] for t in online), online[0]["message"]


@pytest.mark.parametrize("fault", AUDITED)
def test_fault_costs_only_its_exercise_past_the_audit(fault, tmp_path):
    """The audit is a first filter: with it off, the launcher alone still contains the fault."""
    statuses, words = FAULTS[fault]
    assert_costs_only_its_exercise(grade(faulty(fault, tmp_path), *ARGS, audit=False), statuses, words)


def test_monkeypatching_and_fake_reports_gain_nothing(tmp_path):
    sub = copy_solutions(tmp_path / "sub")
    shutil.copy(CORPUS / "monkeypatch" / "online_softmax.py", sub / "online_softmax.py")
    target = tmp_path / "report.json"
    os.environ["FAKE_REPORT_PATH"] = str(target)
    try:
        # past the audit (which refuses the file): the submission writes a fake right there
        report = grade(sub, *ARGS, json_path=target, audit=False)
    finally:
        del os.environ["FAKE_REPORT_PATH"]
    assert report["tests"] and report["score"] == sum(t["score"] for t in report["tests"])
    assert report["score"] < report["max_score"]
    if report.get("isolation", "").startswith("os"):   # the sandbox gives it nowhere to write them
        assert not (sub / "results.json").exists()
    assert all(t["score"] == 0 for t in report["tests"] if t["exercise"] == "online_softmax")


def test_missing_file_is_not_submitted(tmp_path):
    sub = copy_solutions(tmp_path / "sub")
    (sub / "online_softmax.py").unlink()
    report = grade(sub, *ARGS)
    assert_consistent(report)
    for t in report["tests"]:
        if t["exercise"] == "online_softmax":
            assert t["status"] == "error" and "not submitted" in t["message"], t
        elif t["exercise"] == "tiled_attention" and t["layer"] in ("cpu", "adversarial"):
            assert t["status"] == "passed", t


def test_printed_output_is_captured_and_shortened(tmp_path):
    sub = copy_solutions(tmp_path / "sub")
    shutil.copy(CORPUS / "chatty" / "online_softmax.py", sub / "online_softmax.py")
    report = grade(sub, "--exercises", "online_softmax", "--layers", "cpu", "--no-hidden")
    safe = by_id(report)["online_softmax.safe_matches_float64"]
    assert safe["status"] == "passed", safe
    assert "debug: softmax_safe got" in safe["output"] and "to stderr" in safe["output"]
    assert "characters cut" in safe["output"] and len(safe["output"]) <= 2000


def test_a_virtualenv_reached_through_a_symlink_runs_the_workers(tmp_path):
    """repo/.venv -> elsewhere (issue 18): the sandbox binds the venv at its real place and the
    workers start the venv's python there; before, every worker exited 70 at the os level and
    the solutions scored 0 with the lesson's hints."""
    import subprocess
    import sys

    venv = Path(sys.prefix)
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run from a virtualenv here")
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".git", ".venv", "dist", "reports", "__pycache__", ".python", "tests"))
    (repo / ".venv").symlink_to(venv.resolve())
    python = repo / ".venv" / "bin" / Path(sys.executable).name
    out = tmp_path / "r.json"
    proc = subprocess.run([str(python), "-I", str(repo / "grader" / "__main__.py"), "--submission",
                           str(repo / "solutions"), "--exercises", "online_softmax", "--layers", "cpu",
                           "--no-hidden", "--quiet", "--json", str(out)],
                          cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["score"] == report["max_score"] > 0, report["summary"]
    assert report["isolation"].startswith("os") or os.geteuid() != 0, report["isolation"]
