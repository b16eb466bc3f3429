"""A failure of the grader's own machinery is the grader's (issue 18, issue 24): with the OS
sandbox asked for and refused (namespaces unavailable, as in a container without CAP_SYS_ADMIN),
the CLI exits 3, every report says it is not a grade and shows no lesson hint, and Gradescope's
results.json says "Grading failed" with the reason, never a silent 0."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import GRADER, ROOT, SOLUTIONS
from tests.test_gradescope_zip import autograder, run_autograder  # noqa: F401 - the fixture


@pytest.fixture
def no_namespaces(tmp_path):
    """A PATH whose `unshare` fails, as it does where the container refuses namespaces."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "unshare").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_no_sandbox_is_not_a_grade(tmp_path, no_namespaces):
    out = tmp_path / "r.json"
    proc = subprocess.run([*GRADER, "--submission", str(SOLUTIONS), "--exercises", "online_softmax",
                           "--layers", "cpu", "--sandbox", "--quiet", "--json", str(out)],
                          cwd=ROOT, env=no_namespaces, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "grading failed" in proc.stderr and "unavailable" in proc.stderr
    report = json.loads(out.read_text())
    assert report["grading_failed"] and report["summary"].startswith("Not a grade: the grader failed")
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert ran and all(t["status"] == "error" and t["hint"] == "" for t in ran), ran[0]
    assert all("not your code's fault" in t["message"] for t in ran)


def test_gradescope_says_grading_failed_with_the_reason(autograder, no_namespaces):  # noqa: F811
    root, _ = autograder
    results = run_autograder(root, {"online_softmax.py": SOLUTIONS / "online_softmax.py"},
                             args="--exercises online_softmax --layers cpu", env=no_namespaces)
    assert results["tests"] == [] and results["score"] == 0
    assert results["output"].startswith("Grading failed: on ") and "unavailable" in results["output"]
    assert "not a grade" in results["output"]
