"""tools/mutant_repeat.py: a whole run over one exercise's mistakes, each graded twice; none
of online_softmax's checks may move between the grades."""

from __future__ import annotations

from tools import mutant_repeat


def test_online_softmax_mistakes_hold_still(capsys):
    code = mutant_repeat.main(["--repeats", "2", "--exercises", "online_softmax"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 check(s) moved in 2 grades of each case" in out


def test_the_plan_grades_each_case_once_beside_other_exercises():
    """Every case of every kind is in exactly one grade; a grade holds one case per exercise,
    all graded the same way (audit, replay), bench_attn never beside flash_triton (its sweep
    imports it); cases of several files alone."""
    found = mutant_repeat.collect(mutant_repeat.KINDS, None)
    plan = mutant_repeat.grades(found)
    assert sorted(c.name for g in plan for c in g) == sorted(c.name for c in found)
    for g in plan:
        assert len({c.exercise for c in g}) == len(g), [c.name for c in g]
        assert len({(c.audit, c.replay) for c in g}) == 1, [c.name for c in g]
        if any(len(c.files) > 1 for c in g):
            assert len(g) == 1, [c.name for c in g]
        assert not {"bench_attn", "flash_triton"} <= {c.exercise for c in g}, [c.name for c in g]
    assert any(len(g) > 1 and g[0].zero_on for g in plan), "cheats are graded beside others"
