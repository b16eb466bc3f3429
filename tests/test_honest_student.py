"""Honest students never lose to the machinery (issue 52): what a newcomer's realistic mistakes
around the logic look like in the report, each with the message it now gives.

Two grades of a copy of solutions/ on the CPU layers, each with two exercises broken:
  - `broken`: online_softmax.py with a syntax error and io_model.py with an import error (one
    item each, like a compiler's, no hint),
    tiled_attention.py taking the row max over the wrong axis (it raises on most shapes:
    points only for answers);
  - `wrong`: online_softmax.py without l's rescale, tiled_attention.py without the 1/sqrt(d)
    scale: the property checks (no_overflow, memory_is_tiled, inputs_untouched) fail as
    secondary, saying the answer was wrong, and name only checks that failed.
A correct file that imports SciPy at the top keeps full marks
(tests/exercises/online_softmax/variants/scipy_and_stdlib, tests/test_variants.py).
"""

from __future__ import annotations

import pytest

from tests.helpers import SOLUTIONS, by_id, copy_solutions, grade

EXERCISES = "online_softmax,tiled_attention"
IO_IMPORT = "import numpy as np\n"
SOFTMAX_DEF = "def softmax_safe(x: np.ndarray) -> np.ndarray:"
ROW_MAX = "m_new = np.maximum(m, s.max(axis=1))"
RESCALE = "l = l * math.exp(m - m_new) + math.exp(xi - m_new)"
SCALE = "            s *= scale "


def _edit(name: str, find: str, replace: str) -> str:
    text = (SOLUTIONS / name).read_text()
    assert text.count(find) == 1, (name, find)
    return text.replace(find, replace)


def _line_of(name: str, find: str) -> int:
    return (SOLUTIONS / name).read_text().split(find)[0].count("\n") + 1


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    sub = copy_solutions(tmp_path_factory.mktemp("broken") / "sub", {
        "online_softmax.py": _edit("online_softmax.py", SOFTMAX_DEF, SOFTMAX_DEF[:-1]),
        "tiled_attention.py": _edit("tiled_attention.py", ROW_MAX,
                                    "m_new = np.maximum(m, s.max(axis=0))"),
        "io_model.py": _edit("io_model.py", IO_IMPORT, "from numpy import exponential_of\n"),
    })
    return sub, grade(sub, "--exercises", EXERCISES + ",io_model", "--layers", "cpu,adversarial")


@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    sub = copy_solutions(tmp_path_factory.mktemp("wrong") / "sub", {
        "online_softmax.py": _edit("online_softmax.py", RESCALE, "l = l + math.exp(xi - m_new)"),
        "tiled_attention.py": _edit("tiled_attention.py", SCALE, "            pass "),
    })
    return grade(sub, "--exercises", EXERCISES, "--layers", "cpu,adversarial")


def test_a_syntax_error_is_one_item_with_its_file_and_line(broken):
    sub, report = broken
    line = _line_of("online_softmax.py", SOFTMAX_DEF)
    checks = [t for t in report["tests"] if t["exercise"] == "online_softmax" and t["status"] != "not_run"]
    assert checks and all(t["status"] == "error" and t["score"] == 0 for t in checks)
    message = checks[0]["message"]
    assert message.startswith(f"{sub}/online_softmax.py:{line}: SyntaxError: expected ':'"), message
    assert SOFTMAX_DEF[:-1] in message.split("\n")[1], message   # the offending line under it
    assert all(not t["hint"] for t in checks), "no algorithm hint for a file that does not import"
    group = next(g for g in report["failures"] if g["lead"].startswith("online_softmax."))
    assert report["failures"][0] == group, "the file error leads the report"
    assert sorted([group["lead"], *group["same_cause"]]) == sorted(t["name"] for t in checks)


def test_an_import_error_is_one_item_too(broken):
    sub, report = broken
    line = _line_of("io_model.py", IO_IMPORT)
    checks = [t for t in report["tests"] if t["exercise"] == "io_model" and t["status"] != "not_run"]
    assert checks and all(t["status"] == "error" and not t["hint"] for t in checks)
    assert checks[0]["message"].startswith(
        f"{sub}/io_model.py:{line}: ImportError: cannot import name 'exponential_of'"), checks[0]
    leads = [g["lead"] for g in report["failures"]]
    assert sum(lead.startswith("io_model.") for lead in leads) == 1, leads


def test_an_exception_names_the_students_line_and_mostly_raising_earns_nothing(broken):
    sub, report = broken
    line = _line_of("tiled_attention.py", ROW_MAX)
    tests = by_id(report)
    tiled = tests["tiled_attention.ragged_sizes"]
    assert tiled["score"] == 0, tiled
    assert "raised, so the check earns nothing; the first (" in tiled["message"], tiled["message"]
    assert f"{sub}/tiled_attention.py:{line}: ValueError: operands could not be broadcast" \
        in tiled["message"], tiled["message"]
    earned = sum(t["score"] for t in report["tests"] if t["name"].startswith("tiled_attention.")
                 and "naive" not in t["name"])
    assert earned == 0, [(t["name"], t["score"]) for t in report["tests"] if t["score"]]


def test_a_property_on_a_wrong_answer_names_only_checks_that_failed(wrong):
    tests = by_id(wrong)
    failing = {name for name, t in tests.items() if t["status"] in ("failed", "error")}
    for name in ("online_softmax.no_overflow", "tiled_attention.memory_is_tiled",
                 "online_softmax.inputs_untouched", "tiled_attention.inputs_untouched"):
        t = tests[name]
        assert t["status"] == "failed" and t["secondary"], t
        assert t["message"].startswith("The answer was wrong: "), t["message"]
        named = [w.strip(".,") for w in t["hint"].split() if "." in w.strip(".,")]
        assert named and set(named) <= failing, (name, t["hint"])
        for idea in ("subtract the row max", "bigger than a Br x Bc", "kept between calls",
                     "x was left unchanged"):
            assert idea not in t["hint"] + t["message"], (name, idea)


def test_a_hidden_cache_hint_needs_its_evidence(wrong):
    for name in ("online_softmax.hidden_shapes", "tiled_attention.hidden_shapes"):
        t = by_id(wrong)[name]
        assert t["score"] == 0 and "kept between calls" not in t["hint"], t


def test_the_terminal_shows_a_file_error_once_first_and_without_a_hint():
    """Every check of online_softmax reports its import's SyntaxError; the terminal (100
    columns) shows it once, before any other failure, the offending line under it, the checks
    it blocked by name, and no lesson hint."""
    from grader.registry import CHECKS
    from grader.results import Result
    from tests.test_report_safety import all_results, make_report, terminal

    message = "exercises/online_softmax.py:49: SyntaxError: expected ':'\n    def softmax_safe(x)"
    broken = {c.id: Result(c, "error", 0.0, message, file_error=True)
              for c in CHECKS if c.exercise == "online_softmax" and c.layer not in ("gpu", "perf")}
    wrong = {"tiled_attention.ragged_sizes": Result(
        next(c for c in CHECKS if c.id == "tiled_attention.ragged_sizes"), "failed", 0.0,
        "max abs error 1.03 at [1, 102]")}
    text, _ = terminal(make_report(all_results(**broken, **wrong)))
    failures = text[text.index("┘") + 1:]
    assert failures.count("SyntaxError") == 1, text
    assert failures.lstrip().startswith("ERROR exercises/online_softmax.py:49: SyntaxError"), text
    assert "def softmax_safe(x)" in failures and "it blocked online_softmax's" in failures, text
    block = failures[:failures.index("tiled_attention.ragged_sizes")]
    assert "hint:" not in block and "same error as" not in block, text
