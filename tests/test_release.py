"""make release: dist/student holds what students need and nothing of solutions/, hidden_tests/
or tests/; it grades itself (the stubs score 0, not implemented); and the release is refused
when solution code or a hidden check slips in."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT, SOLUTIONS

FAST = ("--layers", "cpu,adversarial", "--exercises", "online_softmax,tiled_attention")


def release(repo, out, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "tools.release", "--out", str(out), *args],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "student"
    proc = release(ROOT, out, *FAST)
    assert proc.returncode == 0, proc.stderr
    return out


def test_release_holds_no_solutions_or_hidden_checks(student):
    files = [p.relative_to(student) for p in student.rglob("*") if p.is_file()]
    tops = {f.parts[0] for f in files}
    assert {"exercises", "grader", "Makefile", "requirements.txt", "tools"} <= tops
    assert not tops & {"solutions", "hidden_tests", "tests"}
    assert not any(f.name in ("release.py", "gradescope.py") and f.parts[0] == "tools" for f in files)
    assert not any("__pycache__" in f.parts for f in files)
    secret = {p.read_bytes() for d in ("solutions", "hidden_tests") for p in (ROOT / d).rglob("*.py")
              if p.read_bytes().strip()}
    assert not [f for f in files if (student / f).read_bytes() in secret]


def test_release_holds_the_stubs_and_keeps_them(student):
    """The stubs, made from the solutions' markers (exercises/*.py is built, not committed, in
    this repo), and a .gitignore that keeps the student's own files in their git."""
    from tools import stubs

    for name, text in stubs.expected_stubs().items():
        assert (student / "exercises" / name).read_text() == text, name
    ignore = (student / ".gitignore").read_text()
    assert "exercises" not in ignore and "staff repo only" not in ignore, ignore


def test_release_grades_itself(student, tmp_path):
    """The released tree's own grader (no PYTHONPATH to this repo) and its Makefile."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    report_path = tmp_path / "stubs.json"
    proc = subprocess.run([sys.executable, "-I", "grader/__main__.py", "--submission", "exercises", *FAST,
                           "--json", str(report_path), "--quiet"],
                          cwd=student, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert report["score"] == 0 and ran
    assert all(t["status"] == "not_implemented" for t in ran), ran
    assert not any(t["hidden"] for t in report["tests"])

    # make check, as a student would run it (tools/setup.sh skipped: .python is up to date)
    (student / ".python").write_text(sys.executable + "\n")
    proc = subprocess.run(["make", "-s", "check", "EX=online_softmax", "LAYERS=cpu"], cwd=student,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((student / "reports" / "check_online_softmax.json").read_text())["score"] == 0
    assert not (student / "reports" / "grade.json").exists()   # make check has its own report
    # without EX: what a student can run (no IMPL=solutions: there is no solutions/), and the names
    proc = subprocess.run(["make", "-s", "check"], cwd=student, env=env, capture_output=True,
                          text=True, timeout=60)
    names = sorted(p.stem for p in (student / "exercises").glob("*.py"))
    assert proc.returncode == 2 and proc.stdout.splitlines() == [
        "usage: make check EX=<exercise> [LAYERS=cpu,adversarial,interp]",
        "exercises: " + " ".join(names)], proc.stdout
    helped = subprocess.run(["make", "-s", "help"], cwd=student, env=env, capture_output=True, text=True)
    assert "make check EX=<exercise>" in helped.stdout and "IMPL" not in helped.stdout


def test_release_ships_the_students_readme_and_given_code(student):
    readme = (student / "README.md").read_text()
    assert "make grade" in readme and "make test" in readme
    assert "staff -->" not in readme and "INSTRUCTORS" not in readme
    assert not (student / "docs" / "INSTRUCTORS.md").exists()
    assert (student / "gpuinfo.py").read_text() == (ROOT / "gpuinfo.py").read_text()
    assert "gpuinfo.py" in (student / "docs" / "SPARK.md").read_text()


@pytest.mark.parametrize("leak, words", [
    ("solution file", "same content as solutions/online_softmax.py"),
    ("edited solution", "online_softmax.safe_matches_float64 is passed, not not_implemented"),
    ("hidden check", "same content as hidden_tests/online_softmax/test_online_softmax_hidden.py"),
    ("doc names a solution", "docs/SPARK.md:1: names 'solutions/'"),
])
def test_release_refuses_leaks(leak, words, tmp_path):
    repo = tmp_path / "repo"   # a copy: the real tree is never touched
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".git", ".venv", "dist", "reports", "build", "__pycache__", ".python"))
    solution = (SOLUTIONS / "online_softmax.py").read_text()
    if leak == "solution file":   # a file beside the stubs (the release copies exercises/)
        (repo / "exercises" / "online_softmax_answers.py").write_text(solution)
    elif leak == "edited solution":   # markers that leave the answer in the stub it makes
        text = re.sub(r"^[ \t]*# BEGIN STUB\n.*?^[ \t]*# END STUB\n", "", solution, flags=re.S | re.M)
        text = re.sub(r"^[ \t]*# (BEGIN|END) SOLUTION\n", "", text, flags=re.M)
        (repo / "solutions" / "online_softmax.py").write_text(text + "# BEGIN SOLUTION\n# END SOLUTION\n")
    elif leak == "hidden check":
        shutil.copy(repo / "hidden_tests" / "online_softmax" / "test_online_softmax_hidden.py", repo / "docs")
    else:
        spark = repo / "docs" / "SPARK.md"
        spark.write_text("See solutions/flash_triton.py.\n" + spark.read_text())
    proc = release(repo, tmp_path / "student", *FAST)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REFUSED" in proc.stderr and words in proc.stderr, proc.stderr


def test_release_carries_the_extension_track(student, tmp_path):
    """The extension track's stubs ship, and its exercises grade in the release, sandboxed like
    every grade (the solutions of the two backward exercises, copied in here, score full marks
    on the CPU layers with the release's own grader)."""
    from grader.registry import EXERCISES

    for name, ex in EXERCISES.items():
        assert (student / "exercises" / f"{name}.py").exists(), name
    extension = [n for n, ex in EXERCISES.items() if ex.track == "extension"]
    assert {"flash_decode", "attention_backward", "flash_backward"} <= set(extension)
    work = tmp_path / "work"
    shutil.copytree(student / "exercises", work)
    for name in ("attention_backward", "flash_backward"):
        shutil.copy(SOLUTIONS / f"{name}.py", work / f"{name}.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    report_path = tmp_path / "extension.json"
    proc = subprocess.run([sys.executable, "-I", "grader/__main__.py", "--submission", str(work),
                           "--exercises", "attention_backward,flash_backward", "--json",
                           str(report_path), "--quiet"],
                          cwd=student, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(report_path.read_text())
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert {t["name"].split(".")[0] for t in ran} == {"attention_backward", "flash_backward"}
    assert all(t["status"] == "passed" for t in ran), [t for t in ran if t["status"] != "passed"]
    if os.geteuid() == 0:
        assert report.get("isolation", "").startswith("os"), report.get("isolation")
