"""Helpers for the repo's own tests: grade a folder through the real command line."""

from __future__ import annotations

import contextlib
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
GRADER = [sys.executable, "-I", str(ROOT / "grader" / "__main__.py")]   # the command make runs


def grader_command(root: Path = ROOT, audit: bool = True, replay: bool = True) -> list[str]:
    """The command line make runs, or the same with a part of the grader switched off:
    `audit=False`, the static audit (grader.judge.source.audit), for tests of what stops student code at
    run time (the sandbox, the launcher's limits): the audit is a first filter a determined
    submission can get past, so those defences must hold without it; `replay=False`, the
    provenance replay (grader.fixtures.REPLAY), for the mutant corpus (wrong answers, caught by
    comparison) and the steady grades only. (`audit.audit;` first: a renamed function fails loudly instead of
    leaving the audit on.) --jobs 1 (last, so it wins): the switch reaches this process only,
    so no grading process of its own (grader.parallel) may grade with it back on."""
    if audit and replay:
        return [sys.executable, "-I", str(root / "grader" / "__main__.py")]
    code = f"import sys; sys.path.append({str(root)!r}); "
    if not audit:
        code += ("from grader.judge.source import audit; "
                 "audit.audit; audit.audit = lambda directory, exercise: []; ")
    if not replay:
        code += "from grader import fixtures; fixtures.REPLAY; fixtures.REPLAY = False; "
    return [sys.executable, "-I", "-c",
            code + "from grader.cli import main; sys.exit(main(sys.argv[1:] + ['--jobs', '1']))"]


def logged_requests(tmp_path: Path, monkeypatch) -> Path:
    """grader.parallel's grading processes replaced by one that logs each request (a JSON line)
    to the returned file and answers with no results."""
    from grader import parallel

    log = tmp_path / "requests.jsonl"
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "parallel_part.py").write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        f"    open({str(log)!r}, 'a').write(line)\n"
        "    print(json.dumps({'results': {}}), flush=True)\n")
    monkeypatch.setattr(parallel, "ROOT", tmp_path)
    return log


def set_options(monkeypatch, **fields) -> None:
    """The grader's options in this test process (grader.options.current), with these fields
    changed until the test ends; calls add up."""
    from grader import options

    before = options.current
    monkeypatch.setattr(options, "current", lambda: before().replace(**fields))


def grader_without_audit(root: Path = ROOT) -> list[str]:
    """grader_command with the static audit off."""
    return grader_command(root, audit=False)


def grade(submission: Path, *args: str, cwd: Path | None = None, timeout: float = 900,
          json_path: Path | None = None, audit: bool = True, replay: bool = True,
          env: dict | None = None, page: bool = False) -> dict:
    """Run `python -m grader` on `submission` and return its JSON report.

    Runs in a subprocess started as make starts it (`python -I grader/__main__.py`: nothing in
    the cwd can shadow an import), so a grader crash shows as a failed test. `audit=False`,
    `replay=False`: with that part of the grader off (`grader_command`). No HTML page and no
    pictures unless `page` (drawing them took half a mutant pack's trusted CPU time;
    tests/test_pages.py grades with them)."""
    out = json_path or Path(tempfile.mkdtemp(prefix="report-")) / "report.json"
    with contextlib.ExitStack() as stack:
        if Path(submission).resolve() == SOLUTIONS:
            # a copy in a 0700 folder: the checkout's solutions/ named in a command line is what
            # the user-level classmate attack (tests/test_user_level.py, perhaps beside this
            # test) looks for
            private = stack.enter_context(tempfile.TemporaryDirectory(prefix="solutions-"))
            submission = copy_solutions(Path(private) / "solutions")
        proc = subprocess.run(
            [*grader_command(audit=audit, replay=replay),
             "--submission", str(submission), "--json", str(out), "--quiet",
             *([] if page else ["--no-page"]), *args],
            cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, **env} if env else None)
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


class Rng:
    """The checks' `rng` fixture outside a grade: a seeded NumPy Generator with its seed."""

    def __init__(self, seed):
        import numpy as np

        self.seed = seed
        self.generator = np.random.default_rng(seed)

    def __getattr__(self, name):
        return getattr(self.generator, name)


def plugin_session(path: Path, exercises: list[str], layers: list[str], configure=None):
    """The checks of one test file (`path`) run in this process by pytest with the grader's
    plugin (no workers, every exercise's needs met); `configure(plugin)` before they run.
    Returns the GradePlugin, its `results` by check id."""
    import pytest

    from grader.plugin import GradePlugin
    from grader.registry import all_checks
    from grader.results import Selection

    class Env:
        def why_not(self, needs):
            return None

    class Workers:
        sources = path.parent

        def all(self):
            return []

        def close(self):
            pass

    plugin = GradePlugin(all_checks(include_hidden=False), Selection(exercises, layers), Env(),
                         Workers())
    if configure is not None:
        configure(plugin)
    code = pytest.main([str(path), "-q", "-p", "grader.fixtures", "-p", "no:cacheprovider",
                        "--noconftest", "--import-mode=importlib", "--rootdir", str(path.parent)],
                       plugins=[plugin])
    assert code in (0, 1)
    return plugin
