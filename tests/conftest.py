"""How `make test` splits the suite over the cores (pytest-xdist, `-n N --dist loadgroup`).

A grade is one subprocess that waits on one worker at a time, so a serial suite keeps one core
busy; `make test` runs it in one pytest process per core (at most four). Each test goes to
whichever process is free, except:
  - a module with a fixture that grades once for all its tests (scope="module") goes whole to
    one process, so that grade is not made twice;
  - the tests of the walls (attacks, the user level, isolation) run one after another in one
    process: each asserts that nothing it started is still running and nothing was planted in
    /tmp, which another test's attack, running at the same time, would break;
  - the corpus cases graded together (tests.packs: a module's PACKS) go to one process per pack,
    which grades the pack once.
This is xdist's loadgroup with the groups decided here, from the test file's name and text:
pytest 9 keeps node ids where xdist 3.8's `xdist_group` marks cannot reach them, so the marks
would group nothing. Without pytest-xdist (a plain `pytest tests/...`) nothing here runs.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

WALLS = {"test_attacks", "test_user_level", "test_isolation", "test_walls", "test_grader_failure"}
HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def group_of(test_file: str) -> str | None:
    """The group of a test file ("tests/test_x.py"): "walls", the file itself when one of its
    fixtures is module-scoped, else None (each test on its own)."""
    path = HERE / Path(test_file).name
    if path.stem in WALLS:
        return "walls"
    try:
        shared = 'scope="module"' in path.read_text()
    except OSError:
        return None
    return test_file if shared else None


# modules whose cases share grades
PACKED = {"test_mutants", "test_variants", "test_wrong", "test_steady_grades"}


def pack_of(test_file: str, test: str) -> str | None:
    """The pack scope of a parametrized test ("test_x[case]") of a PACKED module, if it has one
    (the module's PACKS: {test function: tests.packs.Packs})."""
    stem = Path(test_file).stem
    if stem not in PACKED or "[" not in test:
        return None
    function, _, case = test.partition("[")
    packs = importlib.import_module(f"tests.{stem}").PACKS.get(function)
    scope = None if packs is None else packs.scope(case[:-1])
    return None if scope is None else f"{stem}:{function}:{scope}"


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            test_file, _, test = nodeid.partition("::")
            return group_of(test_file) or pack_of(test_file, test) or nodeid

    return Groups(config, log)
