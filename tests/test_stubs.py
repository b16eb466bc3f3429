"""tools/stubs.py: solutions/<ex>.py is the one source of exercises/<ex>.py (issue 19).

exercises/*.py is what the generator makes from the marked solutions (make builds it; git
does not track it); every solution's markers are balanced and strip out of its stub; a marker that is missing, unbalanced, nested,
misspelt or inside a string fails with file:line; and the marker lines leave every edit that
tests/exercises/<ex>/ (mutants and corpora) make to solutions/ applicable (each `find` still there once).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cases import mutants, runnable
from tests.helpers import EXERCISES, ROOT, SOLUTIONS
from tools import stubs
from tools.stubs import MARKER, MarkerError, solution_of, stub_of

NAMES = sorted(p.name for p in SOLUTIONS.glob("*.py"))


def test_exercises_are_what_the_solutions_make():
    """make builds exercises/*.py from the solutions before it grades or tests (the Makefile's
    STUB_FILES): what is there is what the generator makes, and git does not track it (one
    source: the marked solution), while the student release holds it (test_release.py)."""
    assert stubs.differing(stubs.expected_stubs()) == [], \
        "run make stubs (python -m tools.stubs --force NAME for a file it keeps)"
    assert NAMES == sorted(p.name for p in EXERCISES.glob("*.py"))
    if (ROOT / ".git").exists():
        tracked = subprocess.run(["git", "ls-files", "exercises"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.split()
        assert not [t for t in tracked if t.endswith(".py")], f"exercises/*.py is committed: {tracked}"
        ignored = subprocess.run(["git", "check-ignore", "-q", "exercises/online_softmax.py"],
                                 cwd=ROOT)
        assert ignored.returncode == 0, "exercises/*.py should be ignored (.gitignore)"


def test_check_mode_names_a_stale_stub(tmp_path, capsys, monkeypatch):
    for name in NAMES:
        (tmp_path / name).write_text((EXERCISES / name).read_text())
    (tmp_path / "online_softmax.py").write_text("# edited by hand\n")
    monkeypatch.setattr(stubs, "EXERCISES", tmp_path)
    assert stubs.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "online_softmax.py" in err and "flash_triton.py" not in err


def test_write_mode_makes_every_stub(tmp_path, monkeypatch):
    monkeypatch.setattr(stubs, "EXERCISES", tmp_path)
    monkeypatch.setattr(stubs, "RECORD", tmp_path / ".stubs-written")
    assert stubs.main([]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.py")) == NAMES
    assert all((tmp_path / n).read_text() == (EXERCISES / n).read_text() for n in NAMES)
    assert stubs.main(["--check"]) == 0


@pytest.fixture
def exercises(tmp_path, monkeypatch):
    """A copy of exercises/ in tmp_path, the generator pointed at it and at a fresh record."""
    folder = tmp_path / "exercises"
    folder.mkdir()
    for name in NAMES:
        shutil.copy(EXERCISES / name, folder / name)
    monkeypatch.setattr(stubs, "EXERCISES", folder)
    monkeypatch.setattr(stubs, "RECORD", tmp_path / ".stubs-written")
    return folder


def _written_earlier(exercises, name, text):
    """`text` in exercises/name, as the generator of an earlier solution would have left it."""
    (exercises / name).write_text(text)
    stubs._remember([f"{stubs._sha(text)} {name}"], stubs.RECORD)


def test_filled_in_work_survives_and_is_named(exercises, capsys):
    """Issue 52: in the course's checkout, after `make setup` or a copy that lost the timestamps,
    make runs the generator over a student's (or a TA's) filled-in file: it is kept, and said so."""
    work = (exercises / "online_softmax.py").read_text().replace("raise NotImplementedError",
                                                                 "return 0  # mine\n    raise")
    (exercises / "online_softmax.py").write_text(work)
    assert stubs.main([]) == 0
    assert (exercises / "online_softmax.py").read_text() == work
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "kept " + stubs._shown(exercises / "online_softmax.py") + ": it differs from every stub "
        "written here (your work?); `python -m tools.stubs --force online_softmax` replaces it"]
    assert stubs.main(["--force", "online_softmax"]) == 0
    assert (exercises / "online_softmax.py").read_text() == (EXERCISES / "online_softmax.py").read_text()
    assert "wrote" in capsys.readouterr().out


def test_an_earlier_stub_is_refreshed_and_a_missing_one_written(exercises, capsys):
    _written_earlier(exercises, "tiled_attention.py", "# the stub of an older solution\n")
    (exercises / "flash_triton.py").unlink()
    assert stubs.main([]) == 0
    out = capsys.readouterr().out
    assert sorted(out.splitlines()) == sorted(
        f"wrote {stubs._shown(exercises / n)}" for n in ("tiled_attention.py", "flash_triton.py"))
    assert stubs.main(["--check"]) == 0
    assert stubs.main([]) == 0 and capsys.readouterr().out == ""   # nothing left to do


def test_a_stub_found_in_place_counts_as_written(exercises, capsys):
    """A checkout made before the record existed: a file that is today's stub is recorded, so
    it is refreshed when its solution changes, while other files stay as they are."""
    assert stubs.main([]) == 0 and capsys.readouterr().out == ""
    assert stubs._sha((EXERCISES / "io_model.py").read_text()) in stubs.written_before()


def test_force_names_an_unknown_exercise(exercises, capsys):
    assert stubs.main(["--force", "online_sofmax"]) == 2
    assert "no solutions/online_sofmax.py" in capsys.readouterr().err


def test_make_keeps_work_and_settles(tmp_path):
    """The Makefile's STUB_FILES rule: a solution newer than the filled-in exercise runs the
    generator once, which keeps the file and says so; the touch after it leaves make with
    nothing more to do (no rule that runs on every make)."""
    for rel in ("Makefile", "requirements.txt", "tools/setup.sh", "tools/__init__.py",
                "tools/stubs.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    shutil.copytree(SOLUTIONS, tmp_path / "solutions")
    shutil.copytree(EXERCISES, tmp_path / "exercises")
    (tmp_path / ".python").write_text(sys.executable)
    work = tmp_path / "exercises" / "online_softmax.py"
    work.write_text(work.read_text() + "# my work\n")
    old = (ROOT / "requirements.txt").stat().st_mtime - 100
    for path in (tmp_path / "exercises").glob("*.py"):
        os.utime(path, (old, old))                # a copy that did not keep the timestamps
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    make = ["make", "-s", "-C", str(tmp_path), "exercises/online_softmax.py"]
    first = subprocess.run(make, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert "kept exercises/online_softmax.py: it differs from every stub" in first.stdout
    assert work.read_text().endswith("# my work\n")
    settled = subprocess.run([*make[:-1], "-q", make[-1]], env=env)
    assert settled.returncode == 0, "make would run tools.stubs again"


@pytest.mark.parametrize("name", NAMES)
def test_solution_markers_are_balanced_and_stripped(name):
    source = (SOLUTIONS / name).read_text()
    opened = None
    for number, line in enumerate(source.splitlines(), start=1):
        marker = MARKER.match(line)
        if marker and marker["edge"] == "BEGIN":
            assert opened is None, f"{name}:{number}: a block inside the one of line {opened}"
            opened = number
        elif marker:
            assert opened is not None, f"{name}:{number}: END without BEGIN"
            opened = None
    assert opened is None, f"{name}:{opened}: never closed"
    assert "# BEGIN SOLUTION" in source, f"{name} has no SOLUTION block"
    stub = stub_of(source, name)
    leftover = [line for line in stub.splitlines() if stubs.LOOKALIKE.match(line)]
    assert leftover == [], f"marker lines left in the stub of {name}: {leftover}"
    compile(stub, name, "exec")


def test_a_solution_without_markers_fails():
    with pytest.raises(MarkerError, match=r"^sol\.py:1: no '# BEGIN SOLUTION'"):
        stub_of("def f():\n    return 1\n", "sol.py")


def test_stub_blocks_replace_solution_blocks():
    source = ("def f(x):\n"
              "    # BEGIN SOLUTION\n"
              "    return x + 1\n"
              "    # END SOLUTION\n"
              "    # BEGIN STUB\n"
              "    # # TODO(f): roughly 1 line.\n"
              "    #\n"
              "    # raise NotImplementedError(\"TODO(f): add one\")\n"
              "    # END STUB\n")
    assert stub_of(source) == ("def f(x):\n"
                               "    # TODO(f): roughly 1 line.\n"
                               "\n"
                               "    raise NotImplementedError(\"TODO(f): add one\")\n")


@pytest.mark.parametrize("source, where", [
    ("# BEGIN SOLUTION\nx = 1\n", r":1: '# BEGIN SOLUTION' is never closed"),
    ("x = 1\n# END SOLUTION\n", r":2: '# END SOLUTION' without"),
    ("# BEGIN SOLUTION\n# BEGIN STUB\n# END STUB\n# END SOLUTION\n", r":2: .* do not nest"),
    ("# BEGIN SOLUTION\nx = 1\n# END STUB\n", r":3: '# END STUB' without"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTIONS\n", r":3: not a marker"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN STUB\nraise E\n# END STUB\n",
     r":5: a line of a STUB block"),
    ('"""Doc.\n# BEGIN STUB\n# END STUB\n"""\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n',
     r":2: a marker inside the string"),
])
def test_bad_markers_fail_with_file_and_line(source, where):
    with pytest.raises(MarkerError, match="^sol.py" + where):
        stub_of(source, "sol.py")


def _edits_of_solutions():
    """(label, exercise, find) for every edit the repo's tests apply to a solution file."""
    for m in mutants():
        for find, _ in ((m.find, m.replace), *m.also):
            yield f"mutant {m.name}", m.exercise, find
    for spec_path in sorted(ROOT.glob("tests/**/*.edits.json")):
        spec = json.loads(spec_path.read_text())
        if spec["base"] == "solutions":
            exercise = spec_path.name.removesuffix(".edits.json")
            for find, _ in spec["edits"]:
                yield str(spec_path.relative_to(ROOT)), exercise, find


def test_every_edit_of_a_solution_applies():
    """Each `find` occurs once in the solution as it runs (tests.cases.runnable)."""
    runs = {p.stem: runnable(p.read_text()) for p in SOLUTIONS.glob("*.py")}
    broken = [f"{label}: found {runs[ex].count(find)} times in solutions/{ex}.py as it runs: "
              f"{find[:60]!r}"
              for label, ex, find in _edits_of_solutions() if runs[ex].count(find) != 1]
    assert broken == [], "\n".join(broken)


def test_the_solution_as_it_runs_keeps_every_line_but_the_markers_and_stub():
    source = ('"""Doc."""\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# BEGIN STUB\n'
              '# x = None\n# END STUB\ny = x\n')
    assert solution_of(source) == '"""Doc."""\nx = 1\ny = x\n'
    assert stub_of(source) == '"""Doc."""\nx = None\ny = x\n'
    for path in SOLUTIONS.glob("*.py"):
        compile(solution_of(path.read_text()), path.name, "exec")
