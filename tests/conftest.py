"""How `make test` splits the suite over the cores (pytest-xdist, `-n N --dist loadgroup`).

A grade is one subprocess that waits on one worker at a time, so a serial suite keeps one core
busy; `make test` runs it in one pytest process per core (at most four). Each test goes to
whichever process is free, except:
  - a module with a fixture that grades once for all its tests (scope="module") goes whole to
    one process, so that grade is not made twice;
  - the tests of the walls (attacks, the user level, isolation) run one after another in one
    process: each asserts that nothing it started is still running and nothing was planted in
    /tmp, which another test's attack, running at the same time, would break.
This is xdist's loadgroup with the groups decided here, from the test file's name and text:
pytest 9 keeps node ids where xdist 3.8's `xdist_group` marks cannot reach them, so the marks
would group nothing. Without pytest-xdist (a plain `pytest tests/...`) nothing here runs.
"""

from __future__ import annotations

import functools
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


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0]) or nodeid

    return Groups(config, log)
