"""Adding an exercise is adding folders (issue 19).

In a throwaway copy of the repository, online_softmax's folders are copied to a new exercise,
online_softmax_copy, renamed inside (check ids, imports, TODOs, file and case names) and moved
to the extension track at a later lesson order, so the core stays at 100 points. Nothing else
is edited: the registry, the grader, the reports, the release, the Gradescope zip and the corpus
tests must all pick it up from its folders, and no file that was there before may change.
Only the new exercise is graded, on its CPU layers (online_softmax has cpu and adversarial).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.registry import EXERCISES
from tests.helpers import ROOT

OLD, NEW = "online_softmax", "online_softmax_copy"
LAYERS = "cpu,adversarial"
IGNORE = shutil.ignore_patterns(".git", ".venv", "dist", "reports", "__pycache__", ".python")
# an exercise's folders and files, relative to the repository, named by `{ex}`
FOLDERS = ("grader/exercises/{ex}", "hidden_tests/{ex}", "tests/exercises/{ex}")
FILES = ("solutions/{ex}.py", "exercises/{ex}.py")
KINDS = ("mutants", "wrong", "variants", "cheats")   # tests/test_<kind>.py


def digests(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def renamed(text: str) -> str:
    return text.replace(OLD, NEW)


def copy_file(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        dest.write_text(renamed(src.read_text()))
    except UnicodeDecodeError:   # a binary file (data, an image): copied as it is
        shutil.copy2(src, dest)


def copy_folder(src: Path, dest: Path) -> None:
    """Every file of `src` under `dest`, names and contents renamed. Corpus case folders whose
    name does not hold the exercise's get a suffix: case names are the tests' ids, unique."""
    for path in sorted(src.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            parts = [renamed(p) for p in path.relative_to(src).parts]
            if len(parts) > 2 and parts[0] in ("wrong", "variants", "cheats") and NEW not in parts[1]:
                parts[1] += "_copy"
            copy_file(path, dest.joinpath(*parts))


def add_exercise(repo: Path) -> None:
    """online_softmax's folders copied to online_softmax_copy, on the extension track, last."""
    for folder in FOLDERS:
        copy_folder(repo / folder.format(ex=OLD), repo / folder.format(ex=NEW))
    for name in FILES:
        copy_file(repo / name.format(ex=OLD), repo / name.format(ex=NEW))
    rows = repo / "grader" / "exercises" / NEW / "rows.py"
    last = max(e.order for e in EXERCISES.values()) + 1
    text, n = re.subn(r"\border=\d+", f'track="extension", order={last}', rows.read_text())
    assert n == 1 and "track=" not in rows.read_text(), "expected one order=, and no track="
    rows.write_text(text)


def run(repo: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # the copy's code, not ours
    proc = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def grade(repo: Path, submission: str, out: Path) -> dict:
    run(repo, "-I", "grader/__main__.py", "--submission", submission, "--exercises", NEW,
        "--layers", LAYERS, "--quiet", "--json", str(out / "report.json"),
        "--markdown", str(out / "report.md"))
    return json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """Everything done once, in the copy, before any test looks: the new exercise added, graded
    (solutions, stubs), released, zipped and collected by the corpus tests; with the digest of
    every file the copy held before the exercise was added."""
    tmp = tmp_path_factory.mktemp("add_exercise")
    repo = tmp / "repo"
    shutil.copytree(ROOT, repo, ignore=IGNORE)
    before = digests(repo)
    add_exercise(repo)
    code = ("import json; from grader.registry import EXERCISES, all_checks, public_total; "
            f"print(json.dumps([EXERCISES[{NEW!r}].track, list(EXERCISES)[-1], public_total(), "
            f"sorted(c for c in all_checks() if c.startswith({NEW + '.'!r}))]))")
    out = {"repo": repo, "before": before, "registry": json.loads(run(repo, "-c", code).stdout)}
    for submission in ("solutions", "exercises"):
        (tmp / submission).mkdir()
        out[submission] = grade(repo, submission, tmp / submission)
    out["markdown"] = (tmp / "solutions" / "report.md").read_text()
    run(repo, "-m", "tools.release", "--out", str(tmp / "student"), "--layers", LAYERS,
        "--exercises", NEW)
    out["released"] = set(digests(tmp / "student"))
    run(repo, "-m", "tools.gradescope", "--out", str(tmp / "a.zip"))
    with zipfile.ZipFile(tmp / "a.zip") as zf:
        out["zipped"], out["run_autograder"] = set(zf.namelist()), zf.read("run_autograder").decode()
    out["collected"] = run(repo, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *(f"tests/test_{kind}.py" for kind in KINDS)).stdout
    out["after"] = digests(repo)
    return out


def files_of(repo: Path, folder: str) -> set[str]:
    return {p.relative_to(repo).as_posix() for p in (repo / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_new_exercise_is_registered_on_the_extension_track(done):
    from grader.registry import all_checks

    track, last, core, checks = done["registry"]
    assert (track, last, core) == ("extension", NEW, 100)
    assert checks == sorted(renamed(c) for c in all_checks() if c.startswith(OLD + "."))


def test_solutions_score_full_marks(done):
    report = done["solutions"]
    ran = [t for t in report["tests"] if t["status"] != "not_run"]
    assert ran and {t["exercise"] for t in ran} == {NEW}, sorted({t["exercise"] for t in ran})
    assert any(t["hidden"] for t in ran), "the hidden checks of the new exercise did not run"
    lost = [f"{t['name']}: {t['status']} {t['message'][:200]}" for t in ran if t["status"] != "passed"]
    assert lost == [] and report["score"] == report["max_score"] > 0, "\n".join(lost)
    assert set(report["totals"]["tracks"]) == {"extension"}, report["totals"]["tracks"]
    assert f"{NEW}." in done["markdown"], "the Markdown report does not list the new exercise"


def test_stubs_score_zero(done):
    ran = [t for t in done["exercises"]["tests"] if t["status"] != "not_run"]
    assert ran and {t["exercise"] for t in ran} == {NEW}
    assert all(t["status"] == "not_implemented" and t["score"] == 0 for t in ran), [
        (t["name"], t["status"], t["score"]) for t in ran if t["status"] != "not_implemented"]


def test_release_and_zip_carry_it(done):
    repo, released, zipped = done["repo"], done["released"], done["zipped"]
    public = files_of(repo, f"grader/exercises/{NEW}")
    hidden = files_of(repo, f"hidden_tests/{NEW}")
    assert any(Path(p).name.startswith("test_") for p in public)
    assert any(Path(p).name.startswith("test_") for p in hidden)
    assert public | {f"exercises/{NEW}.py"} <= released, sorted(public - released)
    assert not any(p.startswith("hidden_tests/") for p in released)
    assert public | hidden <= zipped, sorted((public | hidden) - zipped)
    uploads = done["run_autograder"].split("for ex in ", 1)[1].split(";", 1)[0].split()
    assert NEW in uploads, f"run_autograder does not take {NEW}.py from the upload: {uploads}"


def test_the_corpus_tests_find_its_corpora(done):
    for kind in KINDS:
        ids = [line for line in done["collected"].splitlines()
               if line.startswith(f"tests/test_{kind}.py::")]
        cases = [p.name for p in (ROOT / "tests" / "exercises" / OLD / kind).glob("*")]
        old = [i for i in ids if f"[{OLD}-" in i or any(i.endswith(f"[{c}]") for c in cases)]
        new = [i for i in ids if f"[{NEW}-" in i or any(i.endswith(f"[{c}_copy]") for c in cases)]
        assert len(new) == len(old) > 0, (kind, new, old)


def test_no_file_that_was_there_changed(done):
    before, after = done["before"], done["after"]
    changed = sorted(p for p, h in before.items() if after.get(p) != h)
    assert changed == [], f"adding {NEW} changed (or removed) files that were there: {changed}"
