"""One options object holds every setting of a grade (grader.options.Options): the command line
and at most five environment variables fill it, each documented in docs/INSTRUCTORS.md; the
grading processes get it in their requests, the workers never."""

from __future__ import annotations

import json
import re

from grader import options, parallel
from grader.cli import parser
from grader.registry import all_checks
from grader.sandbox import allow_list
from tests.helpers import ROOT, SOLUTIONS, logged_requests

VARIABLE = re.compile(r"\bGRADER_[A-Z0-9_]+")


def _names_in(folder: str) -> dict[str, str]:
    """{GRADER_ name: a file that says it} in the folder's text files."""
    found = {}
    for path in sorted((ROOT / folder).rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for name in VARIABLE.findall(text):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_at_most_five_variables_each_in_the_instructors_table():
    found = {**_names_in("grader"), **_names_in("tools")}
    assert len(found) <= 5, f"more than five GRADER_ variables: {found}"
    assert set(found) == set(options.ENVIRONMENT), found
    text = (ROOT / "docs" / "INSTRUCTORS.md").read_text()
    table = text.split("<!-- variables:", 1)[1].split("<!-- /variables -->", 1)[0]
    rows = {m.group(1) for m in re.finditer(r"^\| `(GRADER_[A-Z0-9_]+)` \|", table, re.M)}
    assert rows == set(found), rows


def test_the_environment_then_the_flags():
    environ = {"GRADER_SANDBOX": "0", "GRADER_JOBS": "3", "GRADER_TIMEOUT_SCALE": "2.5",
               "GRADER_TARGET": "gb10", "GRADER_CACHE": "/scratch/c", "GRADER_SEED": "7"}
    base = options.Options.from_environment(environ)
    assert (base.sandbox, base.jobs, base.timeout_scale, base.target, base.cache, base.seed) == (
        "process", 3, 2.5, "gb10", "/scratch/c", None)     # no other variable is read
    args = parser().parse_args(["--sandbox", "--jobs", "1", "--seed", "0", "--no-timed-first",
                                "--refuse-levels", "user", "--memory-mb", "768"])
    given = options.from_args(args, environ)
    assert (given.sandbox, given.jobs, given.seed, given.timed_first, given.refuse_levels,
            given.memory_mb, given.target) == ("os", 1, 0, False, ("user",), 768, "gb10")
    assert options.from_args(parser().parse_args([]), {}) == options.Options()
    assert options.Options.from_environment({"GRADER_SANDBOX": "user"}).sandbox == "user"


def test_current_is_the_innermost_using():
    inner = options.Options(jobs=2, label="your upload")
    with options.using(inner):
        assert options.current() is inner
    assert options.current() == options.Options.from_environment()


def test_a_grading_process_gets_the_grades_options_in_its_request(tmp_path, monkeypatch):
    """The one channel to grader/parallel_part.py: its request carries the grade's options, as JSON, with
    one grading process (the child's own), whatever the environment says."""
    log = logged_requests(tmp_path, monkeypatch)
    monkeypatch.setenv("GRADER_SANDBOX", "1")
    monkeypatch.setenv("GRADER_JOBS", "4")
    chosen = options.Options(seed=11, timed_first=True, refuse_levels=("os",), call_log="x.jsonl")
    with options.using(chosen):
        parallel.grade_cpu_layers(SOLUTIONS, {"online_softmax": ["cpu"]}, 1,
                                  all_checks(include_hidden=False), False, None, None)
    (sent,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert options.Options.from_dict(sent["options"]) == chosen.replace(jobs=1)


def test_no_option_reaches_a_worker(monkeypatch):
    """The worker's environment is the allow-list it was before the options object: a grade's
    variables stay out (GRADER_TIMEOUT_SCALE was on the list before, and stays)."""
    for name in options.ENVIRONMENT:
        monkeypatch.setenv(name, "1")
    env = allow_list.environment("cpu", "/sandbox/work")
    assert [k for k in env if k.startswith("GRADER_")] == ["GRADER_TIMEOUT_SCALE"]
