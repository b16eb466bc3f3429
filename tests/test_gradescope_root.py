"""`make gradescope-jammy`: the zip as Gradescope runs it, in a root made with debootstrap of Ubuntu
22.04 (Gradescope's default base image, Python 3.10): setup.sh as root builds the image, then each
upload is graded by run_autograder in a fresh overlay under Gradescope's default resources (768 MB
and half a vCPU, as cgroup limits): solutions full marks, stubs 0, an empty upload told the file
names, and the solutions again with CAP_SYS_ADMIN dropped (Docker's default capabilities: the
grade runs at the "user" isolation level, and results.json says so).

Runs only when GRADESCOPE_ROOT names such a root (`python -m tools.gradescope_root build` makes
it; `make gradescope-jammy` does both): it takes about ten minutes, outside `make test`.
GRADESCOPE_TORCH_INDEX: the index setup.sh installs torch from ("" for pip's own: a machine that
cannot reach PyTorch's CPU index gets PyPI's torch, CUDA build and all, which loads more memory).
GRADESCOPE_IMAGE: the image layer (work/image) of an earlier run of the same zip, to skip setup.sh.
Each run's seconds and peak memory are printed (`pytest -s`) and written to
GRADESCOPE_ROOT_LOG (a JSON file) when set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from grader.registry import all_checks
from tests.helpers import ROOT, SOLUTIONS

GRADED_LAYERS = ("cpu", "adversarial", "interp")   # what Gradescope's CPU-only machine runs
ROOT_FS = Path(os.environ.get("GRADESCOPE_ROOT", "/nonexistent"))
RUNS: dict = {}

pytestmark = [pytest.mark.skipif(
    os.geteuid() != 0 or not (ROOT_FS / "usr" / "bin" / "apt-get").exists(),
    reason="needs root and GRADESCOPE_ROOT naming a debootstrap root (make gradescope-jammy)"),
    pytest.mark.timeout(3600)]   # setup.sh alone takes about ten minutes, counted in the first test


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    import subprocess

    from tools.gradescope_root import Image

    tmp = tmp_path_factory.mktemp("gradescope-root")
    zip_path = tmp / "autograder.zip"
    subprocess.run([sys.executable, "-m", "tools.gradescope", "--out", str(zip_path)], cwd=ROOT,
                   check=True, capture_output=True, timeout=120)
    env = {}
    if "GRADESCOPE_TORCH_INDEX" in os.environ:
        env["LAB_TORCH_INDEX"] = os.environ["GRADESCOPE_TORCH_INDEX"]
    kept = os.environ.get("GRADESCOPE_IMAGE")   # an image layer kept from an earlier run (no setup.sh)
    built = Image(ROOT_FS, zip_path, tmp / "work", env, Path(kept) if kept else None)
    record("setup.sh", {"seconds": built.setup_s})
    yield built
    log = os.environ.get("GRADESCOPE_ROOT_LOG")
    if log:
        Path(log).write_text(json.dumps(RUNS, indent=1))


def record(name: str, run: dict) -> None:
    RUNS[name] = {k: v for k, v in run.items() if k in ("seconds", "peak_mb", "oom_kills", "returncode")}
    print(f"\n{name}: {RUNS[name]}")


def graded_total() -> float:
    """The points of every check Gradescope's machine runs, hidden ones included."""
    return sum(c.points for c in all_checks().values() if c.layer in GRADED_LAYERS)


def grade(image, name: str, upload: dict, **kw) -> dict:
    results = image.grade(upload, **kw)
    run = results.pop("_run")
    record(name, run)
    assert run["returncode"] == 0, run["stderr"]
    assert results, f"no results.json:\n{run['stdout']}\n{run['stderr']}"
    assert run["oom_kills"] == 0, f"{run['oom_kills']} processes OOM-killed at 768 MB"
    results["_stdout"] = run["stdout"]
    return results


def test_solutions_score_full_marks_at_gradescope_defaults(image):
    results = grade(image, "solutions", {f"lab/{p.name}": p for p in SOLUTIONS.glob("*.py")})
    assert results["score"] == graded_total() == sum(t["max_score"] for t in results["tests"]), results["output"]
    assert all(t["status"] == "passed" for t in results["tests"])
    assert "Isolation: os:" in results["output"], results["output"]
    assert "isolation: os:" in results["_stdout"]


def test_stubs_score_zero(image):
    results = grade(image, "stubs", {p.name: p for p in (ROOT / "exercises").glob("*.py")})
    assert results["score"] == 0 and results["tests"], results["output"]


def test_an_empty_upload_is_told_the_file_names(image):
    results = grade(image, "empty upload", {"README.txt": ROOT / "requirements.txt"})
    assert results["score"] == 0 and results["tests"]
    assert "Not in the upload: online_softmax.py" in results["output"]
    assert "flash_backward.py" in results["output"]


def test_namespaces_refused_grades_at_the_user_level(image):
    """No CAP_SYS_ADMIN (Docker's default capabilities), in a chroot (so no user namespace
    either): the user level, full marks for the solutions, and results.json names the level."""
    results = grade(image, "solutions, no CAP_SYS_ADMIN", {p.name: p for p in SOLUTIONS.glob("*.py")},
                    no_sys_admin=True)
    assert "Isolation: user:" in results["output"], results["output"]
    assert results["score"] == graded_total(), results["output"]
