"""Triton's front end's verdicts outlive a grade only where no student can write them
(grader.judge.evidence.frontend): at the os and user levels, in the grader's own folder; never at the
process level, nor with GRADER_CACHE=0."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grader.judge.evidence import frontend

pytest.importorskip("triton")


def _sub(level: str):
    return SimpleNamespace(level=SimpleNamespace(as_student=level in ("os", "user")))


def test_a_verdict_is_found_by_a_later_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path))
    key = ("digest", "_kernel", (("x", ("tensor", "float16")),))
    assert not frontend.compiled_before(key, _sub("os"))
    frontend.remember_compiled(key, _sub("os"))
    frontend.COMPILED.discard(key)                  # a new grading process
    assert frontend.compiled_before(key, _sub("user"))
    assert not frontend.compiled_before(("digest", "_other", ()), _sub("os"))
    folder = next(tmp_path.iterdir())
    assert folder.name.startswith("frontend-") and oct(folder.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("level, cache", [("process", None), ("os", "0")])
def test_no_verdict_is_kept_where_a_student_could_write_it(tmp_path, monkeypatch, level, cache):
    monkeypatch.setenv("GRADER_CACHE", cache or str(tmp_path))
    key = ("digest", "_kernel", (level,))
    frontend.remember_compiled(key, _sub(level))
    frontend.COMPILED.discard(key)
    assert not frontend.compiled_before(key, _sub(level))
    assert list(tmp_path.iterdir()) == []
