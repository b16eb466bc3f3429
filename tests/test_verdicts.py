"""grader.judge.perf.verdicts: partial credit from a measurement, with thresholds that are data (each
exercise's bands, a device profile's where the exercise gives one), and no check body writing a
threshold of its own."""

from __future__ import annotations

import re

import pytest

from grader.judge.machine import devices
from grader.judge.perf import verdicts
from grader.registry import EXERCISES, ROOT


def test_linear_both_directions():
    # time ratios: lower is better
    assert verdicts.linear(2.0, full=3, zero=6) == 1.0
    assert verdicts.linear(4.5, full=3, zero=6) == pytest.approx(0.5)
    assert verdicts.linear(9.0, full=3, zero=6) == 0.0
    # fractions of a ceiling: higher is better
    assert verdicts.linear(0.9, full=0.6, zero=0.15) == 1.0
    assert verdicts.linear(0.375, full=0.6, zero=0.15) == pytest.approx(0.5)
    assert verdicts.linear(0.1, full=0.6, zero=0.15) == 0.0


def test_bands_are_the_exercises_and_a_device_may_have_its_own():
    hopper = devices.profile_for((9, 0), "NVIDIA H200", 232448)
    unknown = devices.profile_for((7, 5), "Some GPU")
    assert verdicts.band("softmax_triton", "bandwidth", hopper).full == 0.6
    assert verdicts.band("softmax_triton", "bandwidth", unknown).full == 0.5   # device_bands
    assert verdicts.band("softmax_triton", "bandwidth") == verdicts.band("softmax_triton", "bandwidth", hopper)
    assert verdicts.credit("flash_triton", "vs_sdpa", 4.5, hopper) == pytest.approx(0.5)
    assert verdicts.terms("flash_triton", "vs_sdpa", hopper, "x") == "full marks at 3x or less, none at 6x"
    with pytest.raises(KeyError):
        verdicts.band("flash_triton", "no_such_measure")


def test_every_band_a_check_asks_for_exists_and_no_check_writes_a_threshold():
    asked = set()
    for path in sorted((ROOT / "grader" / "exercises").glob("*/*.py")):
        text = path.read_text()
        asked |= set(re.findall(r'verdicts\.(?:credit|band|terms|settles|settles_over)\(\s*"(\w+)", '
                                r'"(\w+)"', text))
        # a Tally is its file's exercise's: tally.add("measure", ...) (softmax_long's `width` too)
        asked |= {(path.parent.name, m)
                  for m in re.findall(r'(?:tally|width)\.(?:add|reading|ratio)\("(\w+)"', text)}
        assert not re.search(r"(?<![\w.])linear(_credit)?\(", text), f"{path}: credit outside verdicts"
    assert asked, "no perf check asks grader.judge.perf.verdicts"
    for exercise, measure in asked:
        assert measure in EXERCISES[exercise].bands, (exercise, measure)
    for ex in EXERCISES.values():
        for band in [*ex.bands.values(), *(b for d in ex.device_bands.values() for b in d.values())]:
            assert band.full != band.zero and band.what, (ex.name, band)


# ------------------------------------------------------------------ a credit the readings decide


def test_tally_is_the_weighted_mean_and_says_when_the_readings_leave_it_open():
    """flash_triton's band: full marks at 3x SDPA's time or less, none at 6x. Readings well
    inside full marks decide the credit; readings across the band leave it open, and the
    sentence says so with both ends; the credit is the medians' either way."""
    tally = verdicts.Tally("flash_triton")
    assert tally.add("vs_sdpa", 1.7, 1.6, 1.9) == 1.0
    assert tally.add("vs_sdpa", 4.5) == pytest.approx(0.5)      # a plain value: no range
    assert tally.fraction == pytest.approx(0.75) and tally.undecided() == ""

    open_ = verdicts.Tally("flash_triton")
    open_.add("vs_sdpa", 4.5, 4.2, 4.8)                         # credit 0.6 .. 0.4
    assert open_.fraction == pytest.approx(0.5)
    assert re.search(r"from 40% to 60% of the points.*graded at the medians, 50%", open_.undecided())

    weighted = verdicts.Tally("softmax_triton")                 # bandwidth: full 0.6, none 0.15
    weighted.add("bandwidth", 0.6, weight=0.25)
    weighted.add("vs_eager", 1.0, weight=0.75)                  # full 2x, none 1x
    assert weighted.fraction == pytest.approx(0.25)


def test_a_reading_settles_when_its_range_gives_one_credit():
    from grader.judge.perf import timing

    def reading(*samples):
        return timing.Reading.of(samples)

    settles = verdicts.settles("flash_triton", "vs_sdpa", lambda ms: ms / 1.0)
    assert settles(reading(1.6, 1.7, 2.9))            # all full marks
    assert settles(reading(6.1, 7.0, 9.0))            # all none
    assert not settles(reading(4.0, 4.5, 5.0))        # 0.67 .. 0.33
    assert settles(reading(4.49, 4.5, 4.51))
    tally = verdicts.Tally("flash_triton")
    tally.reading("vs_sdpa", reading(4.0, 4.5, 5.0), lambda ms: ms)
    tally.reading("vs_sdpa", 4.5, lambda ms: ms)        # a plain float has no range
    assert tally.fraction == pytest.approx(0.5) and "from 42% to 58%" in tally.undecided()


def test_a_ratio_of_two_readings_less_a_cost_is_judged_across_both_ranges():
    from grader.judge.perf import timing

    top, bottom = timing.Reading.of([4.0, 4.6, 5.2]), timing.Reading.of([1.1, 1.2, 1.3])
    tally, by_hand = verdicts.Tally("flash_triton"), verdicts.Tally("flash_triton")
    tally.ratio("vs_sdpa", top, bottom, less=0.1)
    by_hand.add("vs_sdpa", (4.6 - 0.1) / (1.2 - 0.1),
                *timing.ratio_span(timing.span(top, 0.1), timing.span(bottom, 0.1)))
    assert tally.parts == by_hand.parts and tally.undecided()
    # one reading less a cost: its value and ends through the same function
    one = verdicts.Tally("flash_triton")
    one.reading("vs_sdpa", top, lambda ms: ms / 1.1, less=0.1)
    assert one.parts == [(1.0, *(verdicts.credit("flash_triton", "vs_sdpa", v)
                                  for v in ((4.6 - 0.1) / 1.1, (5.2 - 0.1) / 1.1, (4.0 - 0.1) / 1.1)))]


def test_credit_with_an_undecided_reading_keeps_its_score_and_says_so():
    from grader.results import Credit

    c = Credit()
    c.set(0.5, "N=4096: 4.5x", undecided="not decided in this run: ...")
    assert c.fraction == 0.5 and c.undecided
    assert c.note == "N=4096: 4.5x. Not decided in this run: ..."
    c.set(1.0, "N=4096: 1.7x")
    assert c.note == "N=4096: 1.7x" and c.undecided == ""


def test_an_undecided_check_is_named_in_the_json_report():
    """The flag a perf check's Tally raised reaches the JSON report's test (batch's gradebook
    reads it there for its `undecided` column); a decided check carries none."""
    from grader.registry import CHECKS
    from grader.report.formats import to_json
    from grader.results import GradeReport, Result

    perf = [c for c in CHECKS if c.layer == "perf"][:2]
    results = [Result(perf[0], "failed", 1.5, "4.5x. Not decided in this run: ...",
                      undecided="not decided in this run: ..."),
               Result(perf[1], "passed", perf[1].points, "1.7x")]
    rep = GradeReport("sub", "GPU (test)", results, 1.0, ["perf"], {}, {"perf": 1.0})
    tests = {t["name"]: t for t in to_json(rep)["tests"]}
    assert tests[perf[0].id]["undecided"] and tests[perf[1].id]["undecided"] == ""
