"""tools/mutant_repeat.py: a whole run over one exercise's mistakes, each graded twice; none
of online_softmax's checks may move between the grades."""

from __future__ import annotations

from tools import mutant_repeat


def test_online_softmax_mistakes_hold_still(capsys):
    code = mutant_repeat.main(["--repeats", "2", "--exercises", "online_softmax"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "0 check(s) moved in 2 grades of each mistake" in out
