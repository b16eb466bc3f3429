"""tools/stubs.py: solutions/<ex>.py is the one source of exercises/<ex>.py (issue 19).

exercises/*.py is what the generator makes from the marked solutions (make builds it; git
does not track it); every solution's markers are balanced and strip out of its stub; a marker that is missing, unbalanced, nested,
misspelt or inside a string fails with file:line; and the marker lines leave every edit that
tests/exercises/<ex>/ (mutants and corpora) make to solutions/ applicable (each `find` still there once).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cases import mutants
from tests.helpers import EXERCISES, ROOT, SOLUTIONS
from tools import stubs
from tools.stubs import MARKER, MarkerError, stub_of

NAMES = sorted(p.name for p in SOLUTIONS.glob("*.py"))


def test_exercises_are_what_the_solutions_make():
    """make builds exercises/*.py from the solutions before it grades or tests (the Makefile's
    STUB_FILES): what is there is what the generator makes, and git does not track it (one
    source: the marked solution), while the student release holds it (test_release.py)."""
    assert stubs.differing(stubs.expected_stubs()) == [], "run make stubs"
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
    assert stubs.main([]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.py")) == NAMES
    assert all((tmp_path / n).read_text() == (EXERCISES / n).read_text() for n in NAMES)
    assert stubs.main(["--check"]) == 0


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


def test_markers_leave_every_edit_of_a_solution_applicable():
    """The markers (and the stub text beside them) neither split a `find` nor repeat it."""
    broken = [f"{label}: found {(SOLUTIONS / f'{ex}.py').read_text().count(find)} times in "
              f"solutions/{ex}.py: {find[:60]!r}"
              for label, ex, find in _edits_of_solutions()
              if (SOLUTIONS / f"{ex}.py").read_text().count(find) != 1]
    assert broken == [], "\n".join(broken)
