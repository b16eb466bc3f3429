"""The command line contract: --exercises, --layers, exit statuses, the report files."""

from __future__ import annotations

import json
import subprocess

import pytest

from grader.registry import CHECKS, EXERCISES, LAYERS
from tests.helpers import GRADER, ROOT, SOLUTIONS, by_id, grade

STATUSES = {"passed", "failed", "error", "timeout", "crashed", "not_implemented", "not_run", "advice"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GRADER, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, reason", [
    (("--exercises", "flash"), "unknown exercise flash"),
    (("--layers", "cpu,fast"), "unknown layer fast"),
    (("--submission", "no/such/folder"), "no such folder"),
    (("--frobnicate",), "unrecognized arguments"),
])
def test_bad_arguments_exit_nonzero_with_one_line(args, reason):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], proc.stderr


def test_exercises_and_layers_select(tmp_path):
    report = grade(SOLUTIONS, "--exercises", "online_softmax", "--layers", "cpu", "--no-hidden")
    tests = by_id(report)
    assert set(tests) >= {c.id for c in CHECKS}
    for c in CHECKS:
        t = tests[c.id]
        if c.exercise == "online_softmax" and c.layer == "cpu":
            assert t["status"] == "passed", t
        else:
            assert t["status"] == "not_run" and t["max_score"] == 0, t
    assert report["max_score"] == sum(c.points for c in CHECKS
                                      if c.exercise == "online_softmax" and c.layer == "cpu")
    assert report["layers_run"] == ["cpu"]
    # only layers that hold checks of the selected exercise are mentioned
    assert set(report["layers_not_run"]) == {"adversarial"}
    assert report["layers_not_run"]["adversarial"] == "not selected"


@pytest.mark.parametrize("page", [True, False])
def test_the_page_beside_the_json_unless_no_page(tmp_path, page):
    grade(SOLUTIONS, "--exercises", "online_softmax", "--layers", "cpu", "--no-hidden",
          json_path=tmp_path / "grade.json", page=page)
    assert (tmp_path / "grade.html").is_file() == page


def test_json_schema(tmp_path):
    report = grade(SOLUTIONS, "--exercises", "online_softmax", "--layers", "cpu,adversarial")
    for key in ("score", "max_score", "submission", "device", "elapsed_s", "layers_run",
                "layers_not_run", "tests"):
        assert key in report
    assert report["score"] == sum(t["score"] for t in report["tests"])
    for t in report["tests"]:
        assert {"name", "exercise", "layer", "score", "max_score", "status", "message", "hint"} <= set(t)
        assert t["status"] in STATUSES
        assert t["exercise"] in EXERCISES and t["layer"] in LAYERS


def test_all_report_formats_are_written(tmp_path):
    files = {k: tmp_path / f"out.{k}" for k in ("json", "markdown", "gradescope")}
    proc = run_cli("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu",
                   *(x for k, p in files.items() for x in (f"--{k}", str(p))))
    assert proc.returncode == 0, proc.stderr
    assert "Total:" in proc.stdout and "online_softmax" in proc.stdout
    assert json.loads(files["json"].read_text())["score"] > 0
    assert files["markdown"].read_text().startswith("# Grade:")
    assert "tests" in json.loads(files["gradescope"].read_text())


def test_gradescope_follows_the_spec(tmp_path):
    path = tmp_path / "results.json"
    proc = run_cli("--submission", str(ROOT / "exercises"), "--exercises", "online_softmax",
                   "--layers", "cpu,adversarial", "--gradescope", str(path), "--quiet")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(path.read_text())
    assert isinstance(results["score"], (int, float)) and results["score"] == 0
    assert isinstance(results["execution_time"], int)
    assert isinstance(results["output"], str)
    assert results["tests"]
    for t in results["tests"]:
        assert isinstance(t["name"], str) and t["name"]
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["status"] in ("passed", "failed")
        assert isinstance(t["output"], str)
        assert t["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
    graded = [t for t in results["tests"] if t["max_score"] > 0]
    assert graded and all("not implemented" in t["output"] for t in graded)


def test_sandbox_flags_reach_grade():
    from grader.cli import parser

    assert parser().parse_args([]).sandbox is None            # the launcher's default: on as root
    assert parser().parse_args(["--sandbox"]).sandbox is True
    assert parser().parse_args(["--no-sandbox"]).sandbox is False


def test_progress_on_a_terminal_and_one_header_line_in_logs(tmp_path):
    args = ("--submission", str(SOLUTIONS), "--exercises", "online_softmax", "--layers", "cpu")
    proc = run_cli(*args)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0].startswith("Grading ")
    assert "\x1b" not in proc.stdout + proc.stderr            # logs stay plain
    script = subprocess.run(["script", "-qec", " ".join([*GRADER, *args]), "/dev/null"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    if script.returncode == 127 or "not found" in script.stderr:
        pytest.skip("no `script` here to give the grader a terminal")
    assert script.returncode == 0, script.stdout + script.stderr
    assert "Total:" in script.stdout and "Traceback" not in script.stdout


def test_a_machine_without_the_cuda_driver_is_asked_without_importing_torch():
    """The GPU probe of every grade that may run a GPU layer: where libcuda does not load,
    torch could see no GPU, and importing it only to ask took 1.3-3 s a grade."""
    code = ("import ctypes, sys\n"
            "try:\n    ctypes.CDLL('libcuda.so.1'); print('driver')\n"
            "except OSError:\n"
            "    from grader.environment import detect\n"
            "    env = detect(want_cuda=True)\n"
            "    print(env.cuda_probed, 'cuda' in env.have, 'torch' in sys.modules)\n")
    out = subprocess.run([GRADER[0], "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout.strip()
    if out == "driver":
        pytest.skip("the CUDA driver loads here")
    assert out == "True False False", out
