"""How `make test` splits the suite over the cores (pytest-xdist, `--dist loadgroup`).

A grade is one subprocess that waits on one worker at a time, so a serial suite keeps one core
busy; `make test` runs it in one pytest process per core (at most four). Tests go to whichever
process is free, except:
  - a module whose fixture grades once for all its tests (scope="module") stays in one process,
    so that grade is not made twice;
  - the tests of the walls (attacks, the user level, isolation) run one after another in one
    process: each asserts that nothing it started is still running and nothing was planted in
    /tmp, which another test's attack, running at the same time, would break.
Without pytest-xdist (a plain `pytest tests/...`) the marks do nothing.
"""

from __future__ import annotations

import pytest

WALLS = {"test_attacks", "test_user_level", "test_isolation", "test_walls", "test_grader_failure"}


def _group(item) -> str | None:
    name = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
    if name in WALLS:
        return "walls"
    info = getattr(item, "_fixtureinfo", None)
    defs = [d for ds in (info.name2fixturedefs.values() if info else ()) for d in ds]
    return name if any(str(getattr(d, "scope", "")).endswith("module") for d in defs) else None


def pytest_collection_modifyitems(items):
    for item in items:
        group = _group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
