"""Helpers for the repo's own tests: grade a folder through the real command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
CPU_LAYERS = "cpu,adversarial,interp"


def grade(submission: Path, *args: str, cwd: Path | None = None, timeout: float = 900,
          json_path: Path | None = None) -> dict:
    """Run `python -m grader` on `submission` and return its JSON report.

    Runs in a subprocess, as a student or CI would, so a grader crash shows as a failed test."""
    out = json_path or Path(tempfile.mkdtemp(prefix="report-")) / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "--submission", str(submission), "--json", str(out),
         "--quiet", *args],
        cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, f"grader exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(out.read_text())


def by_id(report: dict) -> dict[str, dict]:
    return {t["name"]: t for t in report["tests"]}


def copy_solutions(dest: Path, replace: dict[str, str] | None = None) -> Path:
    """solutions/ copied to dest, with files replaced by the given texts."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in SOLUTIONS.glob("*.py"):
        shutil.copy(f, dest / f.name)
    for name, text in (replace or {}).items():
        (dest / name).write_text(text)
    return dest
