"""A failure of the grader's own machinery is the grader's (issue 18, issue 24): with the OS
sandbox asked for and refused (namespaces unavailable, as in a container without CAP_SYS_ADMIN),
the CLI exits 3, every report says it is not a grade and shows no lesson hint, and Gradescope's
results.json says "Grading failed" with the reason, never a silent 0 (that half is in
tests/test_gradescope_zip.py, beside the zip it builds)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.helpers import GRADER, ROOT, SOLUTIONS


def no_namespaces_env(tmp_path) -> dict:
    """A PATH whose `unshare` fails, as it does where the container refuses namespaces; with
    no user level either (REFUSE_USER, as for a grader that is not root), no acceptable level
    at all. tests/test_user_level.py has the root whose namespaces are refused."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "unshare").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


REFUSE_USER = ["--refuse-levels", "user"]   # the grader's flag: take the user level as refused


def test_no_sandbox_is_not_a_grade(tmp_path):
    no_namespaces = no_namespaces_env(tmp_path)
    out = tmp_path / "r.json"
    proc = subprocess.run([*GRADER, "--submission", str(SOLUTIONS), "--exercises", "online_softmax",
                           "--layers", "cpu", "--sandbox", "--quiet", "--json", str(out), *REFUSE_USER],
                          cwd=ROOT, env=no_namespaces, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "grading failed" in proc.stderr and "unavailable" in proc.stderr
    report = json.loads(out.read_text())
    assert report["grading_failed"] and report["summary"].startswith("Not a grade: the grader failed")
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert ran and all(t["status"] == "error" and t["hint"] == "" for t in ran), ran[0]
    assert all("not your code's fault" in t["message"] for t in ran)
