"""python -m tools.release --out dist/student: the tree students get, built and checked.

It holds the exercises (stubs), the grader with its public checks, the docs (not the staff's
docs/INSTRUCTORS.md), the Makefile, the students' README (its staff paragraph
taken out), the lesson's gpuinfo.py, requirements and the tools the Makefile runs for students
(tools/setup.sh, tools/bench/). It never holds solutions/, hidden_tests/, the repo's own
tests/ or the instructor tools (this file, tools/gradescope.py, tools/gpu_*).

The release is refused (exit 1, with the reason) when
  - a path in it is named solutions or hidden_tests;
  - a file in it has the same content as a file of solutions/ or hidden_tests/, or imports
    from solutions/, hidden_tests/ or tests/;
  - the README or docs/SPARK.md names or links a file the release leaves out;
  - its own grader, run in the released tree on its exercises (as `make grade` does), gives a
    point or any status but not_implemented: a stub that holds solution code.

    python -m tools.release --out dist/student [--layers cpu,adversarial] [--exercises NAMES]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools import stubs

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["exercises", "grader", "docs"]
FILES = ["Makefile", "README.md", "requirements.txt", ".gitignore", "gpuinfo.py"]
STAFF_DOCS = {"docs/INSTRUCTORS.md"}   # the staff's page stays behind
# the README's staff paragraph, between these markers, is taken out of the students' copy
STAFF_BLOCK = re.compile(r"\n?<!-- staff -->.*?<!-- /staff -->\n?", re.S)
# what a shipped README or doc must not point students to: files the release leaves out
LEFT_OUT_REFERENCE = re.compile(r"(?<![\w.-])(solutions|hidden_tests|tests)/|INSTRUCTORS\.md")
INSTRUCTOR_ONLY = {"tools/release.py", "tools/gradescope.py", "tools/gradescope_root.py", "tools/stubs.py"}  # make release/gradescope(-jammy)/stubs
SECRET = ("solutions", "hidden_tests")
# an import of what the release leaves out: that file would fail in the student's tree
IMPORTS_LEFT_OUT = re.compile(r"^\s*(from|import)\s+(solutions|hidden_tests|tests)\b", re.M)
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
STAFF_IGNORE = "# staff repo only"   # .gitignore: from this line on, the staff repo's own lines
CHECK_LAYERS = "cpu,adversarial,interp"   # what `make grade` runs


class ReleaseError(Exception):
    pass


def build(out: Path) -> list[Path]:
    """Copy the student's files into `out` (emptied first); the files copied, relative."""
    out = out.resolve()
    if out == ROOT or out in ROOT.parents or any(out.is_relative_to(ROOT / s) for s in SECRET):
        raise ReleaseError(f"refusing to build into {out}: choose a new folder such as dist/student")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for folder in FOLDERS:
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, out / folder, ignore=JUNK)
    for staff in STAFF_DOCS:
        target = out / staff
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    for name in FILES + makefile_tools():
        if (ROOT / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, out / name)
    readme = out / "README.md"
    if readme.is_file():
        readme.write_text(STAFF_BLOCK.sub("\n", readme.read_text()))
    # the stubs, made now from the solutions' markers (tools/stubs.py), whatever exercises/ held
    (out / "exercises").mkdir(exist_ok=True)
    for name, text in stubs.expected_stubs().items():
        (out / "exercises" / name).write_text(text)
    ignore = out / ".gitignore"
    if ignore.is_file():   # the staff repo's lines (exercises/*.py is built there) stay behind
        ignore.write_text(ignore.read_text().split(STAFF_IGNORE, 1)[0])
    return sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())


def makefile_tools() -> list[str]:
    """tools/ files the Makefile runs (`tools/setup.sh`, `-m tools.bench`), instructor ones aside."""
    text = (ROOT / "Makefile").read_text()
    used = set(re.findall(r"\btools/[\w.]+", text))
    for m in re.findall(r"-m tools\.(\w+)", text):   # a module, or a package's files (tools/bench/)
        used |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "tools" / m).glob("*.py")} or {f"tools/{m}.py"}
    return ["tools/__init__.py", *sorted(used - INSTRUCTOR_ONLY)]


def _digest(path: Path) -> str | None:
    data = path.read_bytes()
    if not data.strip():   # empty files (__init__.py) say nothing about where they came from
        return None
    return hashlib.sha256(data).hexdigest()


def check_contents(out: Path, files: list[Path]) -> list[str]:
    """Problems: secret folder names, files identical to a solution or a hidden check."""
    secret = {}
    for folder in SECRET:
        for p in (ROOT / folder).rglob("*") if (ROOT / folder).is_dir() else []:
            if p.is_file() and "__pycache__" not in p.parts and _digest(p):
                secret[_digest(p)] = p.relative_to(ROOT)
    problems = [f"{rel}: a path named {part}" for rel in files for part in rel.parts if part in SECRET]
    for rel in files:
        twin = secret.get(_digest(out / rel))
        if twin:
            problems.append(f"{rel}: same content as {twin}")
        if rel.suffix == ".py" and IMPORTS_LEFT_OUT.search((out / rel).read_text(errors="replace")):
            problems.append(f"{rel}: imports from solutions/, hidden_tests/ or tests/, which the "
                            f"release leaves out")
    for rel in student_docs(files):
        text = (out / rel).read_text(errors="replace")
        for m in LEFT_OUT_REFERENCE.finditer(text):
            line = text[: m.start()].count("\n") + 1
            problems.append(f"{rel}:{line}: names {m.group(0)!r}, which the release leaves out")
        for link in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" not in link and not (out / rel).parent.joinpath(link).exists():
                problems.append(f"{rel}: links to {link}, which the release does not hold")
    return problems


def student_docs(files: list[Path]) -> list[Path]:
    """The pages written for students: the README and the GPU pages they are sent to."""
    return [rel for rel in files if rel.as_posix() in ("README.md", "docs/SPARK.md")]


def check_stubs(out: Path, layers: str, exercises: str | None) -> list[str]:
    """Problems: the released grader, on the released exercises, must give 0 and only TODOs."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "stubs.json"
        cmd = [sys.executable, "-I", "-B", "grader/__main__.py", "--submission", "exercises", "--layers", layers,
               "--json", str(report_path), "--quiet", "--no-hidden"]
        if exercises:
            cmd += ["--exercises", exercises]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the released grader only
        proc = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0 or not report_path.exists():
            return [f"the released grader failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}"]
        report = json.loads(report_path.read_text())
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    if not ran:
        return ["the released grader ran no check on the exercises"]
    problems = [f"exercises/{t['exercise']}.py: {t['name']} is {t['status']}, not not_implemented "
                f"(solution code in a stub?): {t['message'].splitlines()[0] if t['message'] else ''}"
                for t in ran if t["status"] != "not_implemented"]
    if report["score"] != 0:
        problems.append(f"the stubs score {report['score']} points, not 0")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="dist/student", help="folder to build (emptied first)")
    p.add_argument("--layers", default=CHECK_LAYERS, help=f"layers graded on the stubs ({CHECK_LAYERS})")
    p.add_argument("--exercises", help="exercises graded on the stubs (default: all)")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        files = build(out)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 2
    problems = check_contents(out, files)
    if not problems:   # grading takes a while: only once the contents are clean
        problems = check_stubs(out, args.layers, args.exercises)
    if problems:
        print(f"release: REFUSED, {out} must not be handed out:", file=sys.stderr)
        for line in problems:
            print(f"  - {line}", file=sys.stderr)
        return 1
    print(f"release: {out} ({len(files)} files): no solutions, no hidden checks, and its own "
          f"grader gives the stubs 0 points, all not implemented ({args.layers})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
