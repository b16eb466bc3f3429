"""grader.judge.verdicts: partial credit from a measurement, with thresholds that are data (each
exercise's bands, a device profile's where the exercise gives one), and no check body writing a
threshold of its own."""

from __future__ import annotations

import re

import pytest

from grader.judge import devices, verdicts
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
    for path in sorted((ROOT / "grader" / "exercises").glob("*/test_*.py")):
        text = path.read_text()
        asked |= set(re.findall(r'verdicts\.(?:credit|band|terms)\("(\w+)", "(\w+)"', text))
        assert not re.search(r"(?<![\w.])linear(_credit)?\(", text), f"{path}: credit outside verdicts"
    assert asked, "no perf check asks grader.judge.verdicts"
    for exercise, measure in asked:
        assert measure in EXERCISES[exercise].bands, (exercise, measure)
    for ex in EXERCISES.values():
        for band in [*ex.bands.values(), *(b for d in ex.device_bands.values() for b in d.values())]:
            assert band.full != band.zero and band.what, (ex.name, band)
