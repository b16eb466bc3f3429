"""make gradescope: the zip, unpacked into Gradescope's folder layout in a temporary directory,
grades an upload and writes a results.json that follows Gradescope's spec, hidden checks
included and marked after_published."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from grader.registry import all_checks
from tests.helpers import ROOT, SOLUTIONS

ARGS = "--exercises online_softmax,tiled_attention --layers cpu,adversarial"


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """tmp/autograder laid out as on Gradescope: source/ (the zip), run_autograder, submission/."""
    tmp = tmp_path_factory.mktemp("gradescope")
    zip_path = tmp / "autograder.zip"
    proc = subprocess.run([sys.executable, "-m", "tools.gradescope", "--out", str(zip_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    root = tmp / "autograder"
    with zipfile.ZipFile(zip_path) as zf:
        names = zf.namelist()
        for info in zf.infolist():   # extractall drops the permission bits
            zf.extract(info, root / "source")
            os.chmod(root / "source" / info.filename, info.external_attr >> 16)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    return root, names


def run_autograder(root, upload: dict, python: str = sys.executable, args: str = ARGS,
                   env: dict | None = None) -> dict:
    """Put `upload` {relative path: source file} in submission/, run run_autograder there
    (in `env`, os.environ by default)."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    for rel, src in upload.items():
        (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, root / "submission" / rel)
    env = {**(env or os.environ), "AUTOGRADER_ROOT": str(root), "PYTHON": python}
    env.pop("PYTHONPATH", None)   # the zip's grader, not the repo's
    proc = subprocess.run([str(root / "run_autograder"), *args.split()], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads((root / "results" / "results.json").read_text())


def test_zip_contents(autograder):
    root, names = autograder
    assert {"setup.sh", "run_autograder", "requirements.txt", "grader/__main__.py",
            "grader/exercises/flash_triton/rows.py", "hidden_tests/flash_triton/rows.py"} <= set(names)
    assert not any(n.startswith(("solutions/", "tests/", "exercises/")) or "__pycache__" in n
                   for n in names)
    for script in ("setup.sh", "run_autograder"):
        mode = (root / "source" / script).stat().st_mode
        assert mode & stat.S_IXUSR, f"{script} is not executable"
        assert (root / "source" / script).read_text().startswith("#!/usr/bin/env bash")
    subprocess.run(["bash", "-n", str(root / "source" / "setup.sh")], check=True)
    # the extension track is graded there too: its checks and hidden checks ship, and the run
    # script names every exercise
    assert {"grader/exercises/flash_backward/rows.py", "grader/exercises/attention_backward/rows.py",
            "grader/exercises/flash_decode/rows.py", "hidden_tests/flash_backward/test_flash_backward_hidden.py"} <= set(names)
    run = (root / "source" / "run_autograder").read_text()
    assert all(n in run for n in ("flash_decode", "attention_backward", "flash_backward"))


def test_results_json_follows_the_spec(autograder):
    root, _ = autograder
    # the upload as a student might make it: the files inside a folder
    results = run_autograder(root, {f"lab/{p.name}": p for p in SOLUTIONS.glob("*.py")})
    assert isinstance(results["execution_time"], int)
    assert isinstance(results["output"], str) and results["output"]
    tests = results["tests"]
    graded = [t for t in tests if t["max_score"] > 0]
    hidden = {c.id for c in all_checks().values() if c.hidden}
    assert graded and results["score"] == sum(t["score"] for t in tests) == sum(t["max_score"] for t in graded)
    for t in tests:
        assert isinstance(t["name"], str) and t["name"]
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["status"] in ("passed", "failed") and isinstance(t["output"], str)
        assert t["visibility"] == ("after_published" if t["number"] in hidden else "visible"), t
    assert {t["number"] for t in graded} & hidden, "no hidden check was graded"


def test_an_empty_upload_scores_zero_and_is_told_the_file_names(autograder):
    root, _ = autograder
    results = run_autograder(root, {"README.txt": ROOT / "requirements.txt"})
    graded = [t for t in results["tests"] if t["max_score"] > 0]
    assert results["score"] == 0 and graded
    assert all("not submitted" in t["output"] for t in graded)
    # the messages name the upload, not the temporary folder it was graded from
    assert all("/tmp" not in t["output"] and "your upload" in t["output"] for t in graded)
    assert "Not in the upload: online_softmax.py, tiled_attention.py" in results["output"]
    assert "bench_attn.py" in results["output"]   # every name the autograder looks for


def test_visible_output_shows_no_hidden_score_and_no_not_run_check(autograder):
    """A half-done upload (online_softmax solved, tiled_attention a stub): the top-level output
    counts public points only, hidden checks are after_published, and checks that cannot run on
    Gradescope (gpu, perf) are not in tests[] at all."""
    root, _ = autograder
    results = run_autograder(root, {"online_softmax.py": SOLUTIONS / "online_softmax.py",
                                    "tiled_attention.py": ROOT / "exercises" / "tiled_attention.py"},
                             args="--exercises online_softmax,tiled_attention")
    checks = all_checks()
    public = [t for t in results["tests"] if not checks[t["number"]].hidden]
    hidden = [t for t in results["tests"] if checks[t["number"]].hidden]
    assert hidden and all(t["visibility"] == "after_published" for t in hidden)
    assert all(t["visibility"] == "visible" for t in public)
    shown = f"{sum(t['score'] for t in public):g} / {sum(t['max_score'] for t in public):g} public points"
    assert results["output"].startswith("Total: " + shown), results["output"]
    assert "hidden" not in results["output"].split("\n")[0].split(";")[0]
    total = sum(t["score"] for t in results["tests"])
    assert f"/ {sum(t['max_score'] for t in results['tests']):g}" not in results["output"]
    assert results["score"] == total
    ran = {t["number"] for t in results["tests"]}
    assert not {c.id for c in checks.values() if c.layer in ("gpu", "perf")} & ran
    assert all(t["status"] in ("passed", "failed") for t in results["tests"])


def test_a_relative_root_works_from_any_folder_and_a_missing_one_fails_loudly(autograder, tmp_path):
    root, _ = autograder
    upload = root / "submission"
    shutil.rmtree(upload, ignore_errors=True)
    upload.mkdir()
    shutil.copy(SOLUTIONS / "online_softmax.py", upload / "online_softmax.py")
    (root / "results" / "results.json").unlink(missing_ok=True)
    env = {**os.environ, "AUTOGRADER_ROOT": os.path.relpath(root, tmp_path), "PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    args = ["--exercises", "online_softmax", "--layers", "cpu",
            "--memory-mb", "768"]   # Gradescope's default container
    proc = subprocess.run([str(root / "run_autograder"), *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((root / "results" / "results.json").read_text())["score"] > 0
    # results/stdout: the files found, the isolation level, the layers' seconds
    assert "online_softmax.py" in proc.stdout and "isolation:" in proc.stdout
    assert "layers run: cpu" in proc.stdout, proc.stdout
    # the container's limits against the settings the docs give, in the staff's log
    assert "resources: memory 768 MB" in proc.stdout and "below the 1536 MB" in proc.stdout, proc.stdout
    env["AUTOGRADER_ROOT"] = str(tmp_path / "nowhere")
    proc = subprocess.run([str(root / "run_autograder")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and "no folder" in proc.stderr


FORGED = {"score": 999, "output": "forged", "tests": []}


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_results_file_there_before_the_run_is_not_kept(autograder, planted):
    root, _ = autograder
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "results").mkdir()
    if planted == "file":
        (root / "results" / "results.json").write_text(json.dumps(FORGED))
    else:
        (root / "results" / "results.json").mkdir()
        (root / "results" / "results.json" / "x.json").write_text(json.dumps(FORGED))
    results = run_autograder(root, {"README.txt": ROOT / "requirements.txt"})
    assert results["score"] == 0 and results["tests"] and results != FORGED


@pytest.mark.parametrize("case", ["grader fails", "forger exits 0"])
def test_an_incomplete_grade_says_grading_failed(autograder, tmp_path, case):
    """Fail closed: whatever stops the grader from completing, or writes results.json in its
    place, gives a result that says grading failed, never a grade."""
    root, _ = autograder
    python, args = sys.executable, ARGS
    if case == "grader fails":
        args = ARGS + " --layers nonsense"
    else:   # something in the grader's place writes full marks where it was told to and exits 0
        fake = tmp_path / "python"
        fake.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --gradescope ] && out=$2; shift; done\n"
                        f"echo '{json.dumps(FORGED)}' > \"$out\"\n")
        fake.chmod(0o755)
        python = str(fake)
    results = run_autograder(root, {f"{p.name}": p for p in SOLUTIONS.glob("*.py")}, python, args)
    assert results["score"] == 0 and results["tests"] == [], results
    assert "Grading failed" in results["output"]


def test_no_sandbox_says_grading_failed_with_the_reason(autograder, tmp_path):
    """Namespaces refused (tests/test_grader_failure.py): results.json says why, never a 0."""
    from tests.test_grader_failure import REFUSE_USER, no_namespaces_env

    no_namespaces = no_namespaces_env(tmp_path)
    root, _ = autograder
    results = run_autograder(root, {"online_softmax.py": SOLUTIONS / "online_softmax.py"},
                             args=" ".join(["--exercises online_softmax --layers cpu", *REFUSE_USER]),
                             env=no_namespaces)
    assert results["tests"] == [] and results["score"] == 0
    assert results["output"].startswith("Grading failed: on ") and "unavailable" in results["output"]
    assert "not a grade" in results["output"]
