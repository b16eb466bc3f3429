"""tools/perf_repeat.py (issue 20's "the same kernel graded twice in a row"): its table and its
verdict on made-up reports, and a whole run on the CPU layer (the perf layer needs a GPU)."""

from __future__ import annotations

import pytest

from tools import perf_repeat


def _report(**scores) -> dict:
    return {"tests": [{"name": name, "score": s, "max_score": 4.0, "status": "passed",
                       "undecided": "not decided" if s == 3.5 else ""}
                      for name, s in scores.items()]}


def test_the_table_shows_each_run_the_largest_difference_and_the_undecided():
    reports = [_report(a=4.0, b=3.0), _report(a=4.0, b=3.5), _report(a=4.0, b=3.1)]
    lines, steady = perf_repeat.table(reports, tolerance=0.05)
    assert lines[2] == "| a | 4.000 | 4.000 | 4.000 | 0.000 of 4 | 0 of 3 |"
    assert lines[3] == "| b | 3.000 | 3.500 | 3.100 | 0.500 of 4 | 1 of 3 |"
    assert not steady                                   # 0.5 > 0.05 x 4
    assert perf_repeat.table(reports, tolerance=0.2)[1]


def test_a_whole_run_on_the_cpu_layer(tmp_path):
    code = perf_repeat.main(["--repeats", "2", "--layers", "cpu", "--variant",
                             "flash_decode/decode_fp16_elementwise_qk", "--out", str(tmp_path)])
    text = (tmp_path / "summary.md").read_text()
    assert code == 0, text
    assert "flash_decode/decode_fp16_elementwise_qk: held still (2 grades" in text
    assert "| flash_decode." in text and (tmp_path / "run-2.json").is_file()


def test_a_variant_that_is_not_there_says_where_it_looked(tmp_path):
    with pytest.raises(SystemExit, match="no variant flash_decode/nothing"):
        perf_repeat.main(["--variant", "flash_decode/nothing", "--out", str(tmp_path)])
