"""Pictures of failed answers, the report page and the class page, tested as people see them
(issue 55).

- every known mistake of the NumPy core exercises (tests/exercises/*/mutants.py): its picture
  marks the region the mistake damages, read from the map the picture draws
  (pictures.layers: the cells and rows marked wrong), not from the PNG: the rows whose max
  moved after the first key block for a missing alpha, the rows that overflow or underflow for
  a missing max, every element for a missing scale or division; the same for the Triton core
  exercises' mistakes, run by the interpreter in a process of their own (tests/triton_pictures.py),
  except those that load or store past a tensor (the grader's bounds checks name them);
- one grade (a batch of two submissions: one mistake in each core exercise, Triton's included,
  and the stubs): each picture in its report marks the damage; the page is one file with no
  http(s) address; the terminal names the page and maps the lead failure within one screen;
  Gradescope carries the picture as HTML; the class page ranks the mistakes;
- a real headless browser (Chromium from Debian's packages; `make test` installs it as root)
  opens the report page and the class page: the lead failure's picture is on the first screen,
  pixel for pixel. The screenshots stay in the test's tmp_path, whose path the test prints.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close
from grader.judge.answers.pictured import wrong_map
from grader.report import pictures
from tests.helpers import EXERCISES, ROOT, SOLUTIONS, copy_solutions

CORE_NUMPY = ("online_softmax", "tiled_attention")
# the mistakes of the module's grade: one per core exercise, its Triton ones run by the interpreter
GRADED = {"online_softmax": "no_max_subtraction", "tiled_attention": "acc_not_rescaled",
          "softmax_triton": "padding_loaded_as_zero", "flash_triton": "acc_not_rescaled"}
ADDRESS = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def mutants(exercise: str) -> dict:
    return {m.name: m for m in importlib.import_module(f"tests.exercises.{exercise}.mutants").MUTANTS}


def mutated(exercise: str, name: str | None) -> types.ModuleType:
    """solutions/<exercise>.py with the mutant's edit (None: none), as a module of this process
    (the repo's own mistakes: NumPy only, nothing at import)."""
    source = (SOLUTIONS / f"{exercise}.py").read_text()
    if name is not None:
        source = mutants(exercise)[name].apply(source)
    module = types.ModuleType(f"mutant_{exercise}_{name}")
    exec(compile(source, f"{exercise}.py", "exec"), module.__dict__)
    return module


def picture_of(got, expected, **kw) -> dict | None:
    """The picture assert_close attaches to its failure, None when the answer is right."""
    try:
        assert_close(got, expected, **kw)
    except CheckFailed as e:
        assert e.picture is not None, f"a {e.kind} failure without a picture: {e}"
        return e.picture
    return None


# ------------------------------------------------------------- the map is assert_close's verdict


def test_wrong_map_is_what_assert_close_counts():
    rng = np.random.default_rng(5)
    e = rng.standard_normal((3, 70, 40))
    g = e + (rng.random(e.shape) < 0.1) * 1e-3
    g[1, 5, 7], g[1, 6, 7], g[2, 9, 9] = np.nan, np.nan, np.inf
    atol, rtol = 1e-4, 1e-4
    with pytest.raises(CheckFailed) as raised:
        assert_close(g, e, atol=atol, rtol=rtol, dtype="float64", grid=(16, None))
    # NaN fails first; the picture is of the (batch) slice with the most NaN, NaN drawn as NaN
    picture, wrong = raised.value.picture, wrong_map(g, e, atol, rtol)
    assert raised.value.kind == "nan" and picture["slice"] == [1]
    assert picture["wrong_count"] == int(wrong[1].sum())
    assert (pictures.layers(picture)["rows_wrong"] == wrong[1].any(axis=1)).all()
    special = pictures.layers(picture)["special"]
    assert {tuple(x) for x in np.argwhere(special == "n")} == {(5 // picture["row_step"], 7 // picture["col_step"]),
                                                             (6 // picture["row_step"], 7 // picture["col_step"])}
    # values: the map counts what the message counts, and the slice is the worst element's
    g[1, 5, 7], g[1, 6, 7], g[2, 9, 9] = e[1, 5, 7], e[1, 6, 7], e[2, 9, 9] + 1.0
    with pytest.raises(CheckFailed, match=f"{int(wrong_map(g, e, atol, rtol).sum())} of ") as raised:
        assert_close(g, e, atol=atol, rtol=rtol, dtype="float64")
    assert raised.value.picture["slice"] == [2]


# --------------------------------------------------- the NumPy mistakes: the region they damage


def _tiled(module, Q, K, V, Br=32, Bc=32):
    out = module.tiled_attention(Q, K, V, Br=Br, Bc=Bc)
    return picture_of(out, reference.attention(Q, K, V), input_dtype=Q.dtype.name,
                      terms=Q.shape[0], grid=(Br, None))


def _naive(module, Q, K, V):
    return picture_of(module.naive_attention(Q, K, V), reference.attention(Q, K, V),
                      input_dtype=Q.dtype.name, terms=Q.shape[0])


def _rows(n, d, rng, scale=1.0):
    return (rng.standard_normal((n, d)) * scale).astype(np.float32)


def max_moves(rng, N=128, d=16, moved=slice(64, None)):
    """(Q, K, V, rows): every row's max is key 0 (the first key block), except `moved` rows,
    whose max moves into the last key block: only those rows see alpha < 1."""
    Q = rng.integers(-1, 2, (N, d)).astype(np.float32)
    K = rng.integers(-1, 2, (N, d)).astype(np.float32)
    Q[:, :2], K[:, :2] = 0, 0
    Q[:, 0], K[0, 0] = 1, 6 * np.sqrt(d)
    Q[moved, 1], K[-3:, 1] = 1, 12 * np.sqrt(d)
    rows = np.zeros(N, bool)
    rows[moved] = True
    return Q, K, _rows(N, d, rng), rows


def scores_far(rng, N=96, d=16, far=slice(0, 40), sign=1.0):
    """(Q, K, V, rows): the `far` rows' scores are all near sign * 400 (past exp's range in
    float32 either way), the other rows' are ordinary."""
    Q, K = _rows(N, d, rng), _rows(N, d, rng)
    K[:, 0] = 1.0
    Q[:, 0] = 0.0
    Q[far, 0] = sign * 400 * np.sqrt(d)
    rows = np.zeros(N, bool)
    rows[far] = True
    return Q, K, _rows(N, d, rng), rows


def every_element(picture) -> bool:
    return picture is not None and picture["wrong_count"] == picture["size"]


def rows_exactly(rows):
    return lambda p: p is not None and (pictures.layers(p)["rows_wrong"] == rows).all()


# mutant -> what to run: (module, rng) -> (its picture, a test of what the picture marks; None:
# the values are right, so there must be no picture). None: no output of the mistake can be
# drawn, with the reason
NUMPY_MISTAKES = {
    "tiled_attention": {
        "acc_not_rescaled": lambda m, rng: (lambda Q, K, V, rows: (
            _tiled(m, Q, K, V), rows_exactly(rows)))(*max_moves(rng)),
        "no_scale": lambda m, rng: (_tiled(m, *(_rows(100, 16, rng) for _ in range(3))),
                                    every_element),
        "no_final_division": lambda m, rng: (_tiled(m, *(_rows(100, 16, rng) for _ in range(3))),
                                             every_element),
        # the keys of the short last block are dropped: every query row misses them
        "partial_block_dropped": lambda m, rng: (_tiled(m, *(_rows(100, 16, rng) for _ in range(3))),
                                                 lambda p: pictures.layers(p)["rows_wrong"].all()),
        # the right answer through N x N scores (memory_is_tiled's idea): nothing is drawn
        "full_score_matrix": lambda m, rng: (_tiled(m, *(_rows(100, 16, rng) for _ in range(3))),
                                             None),
        "no_running_max": lambda m, rng: (lambda Q, K, V, rows: (
            _tiled(m, Q, K, V), rows_exactly(rows)))(*scores_far(rng)),
        "running_max_starts_at_zero": lambda m, rng: (lambda Q, K, V, rows: (
            _tiled(m, Q, K, V), rows_exactly(rows)))(*scores_far(rng, sign=-1.0)),
        "naive_no_scale": lambda m, rng: (_naive(m, *(_rows(100, 16, rng) for _ in range(3))),
                                          every_element),
        "naive_no_max_subtraction": lambda m, rng: (lambda Q, K, V, rows: (
            _naive(m, Q, K, V), rows_exactly(rows)))(*scores_far(rng)),
    },
    "online_softmax": {
        # (m, l) states are compared as two numbers (assert_state): nothing to draw
        "merge_without_rescaling": None,
        "running_max_never_updated": lambda m, rng: (
            picture_of(m.softmax_online(x := rng.standard_normal(300)), reference.softmax(x),
                       input_dtype="float64", terms=300), every_element),
        # exp overflows exactly where x is large: NaN there, and nothing else is off
        "no_max_subtraction": lambda m, rng: (lambda x: (
            picture_of(m.softmax_safe(x), reference.softmax(x), input_dtype="float64", terms=x.size),
            lambda p: (pictures.layers(p)["special"][0] == "n").tolist()
            == (x.reshape(-1, p["col_step"]).max(axis=1) > 709.8).tolist()))(
            np.where(np.arange(256) % 50 == 7, 1000.0 + np.arange(256) % 3, rng.standard_normal(256))),
        # right values: only the read log (advice) sees it, and nothing is drawn
        "two_passes": lambda m, rng: (picture_of(m.softmax_online(x := rng.standard_normal(300)),
                                                 reference.softmax(x), input_dtype="float64",
                                                 terms=300), None),
        "seeded_with_first_element": None,  # wrong only for an empty input: nothing to draw
    },
}


def test_every_numpy_mistake_has_a_case_here():
    for exercise in CORE_NUMPY:
        assert set(NUMPY_MISTAKES[exercise]) == set(mutants(exercise)), exercise


@pytest.mark.parametrize("exercise, name", [(e, n) for e in CORE_NUMPY for n in NUMPY_MISTAKES[e]])
def test_picture_marks_what_the_mistake_damages(exercise, name):
    case = NUMPY_MISTAKES[exercise][name]
    if case is None:
        pytest.skip(f"{exercise} {name}: no wrong output to draw (see NUMPY_MISTAKES)")
    picture, marks = case(mutated(exercise, name), np.random.default_rng(55))
    if marks is None:   # a mistake the values do not show: no picture
        assert picture is None
        return
    assert picture is not None, f"{name}: the answer was right on these inputs"
    assert marks(picture), (name, picture["rows_wrong"], picture["wrong_count"], picture["size"])
    assert pictures.render(picture)[:8] == b"\x89PNG\r\n\x1a\n"


def nan_exactly_in(rows):
    """The picture's NaN cells are the cells of `rows` (bool per row), no others."""
    def marks(p):
        step = p["row_step"]
        cells = [bool(rows[i * step:(i + 1) * step].any()) for i in range(len(p["special"]))]
        return p["kind"] == "nan" and ["n" in row for row in p["special"]] == cells
    return marks


def _rows_from(start, n):
    rows = np.zeros(n, bool)
    rows[start] = True
    return rows


# The Triton core exercises' mistakes, run by the interpreter in a process of their own
# (tests/triton_pictures.py, which builds each mistake's inputs): mutant -> what its picture
# marks; None: the values are right, so no picture; RAISES: the mistake raises on these inputs
# (nothing to draw); OUT_OF_BOUNDS: not run (a load or store past the tensor, which the
# interpreter would make in that process: the grader's bounds checks catch it in a worker)
RAISES, OUT_OF_BOUNDS = "raises", "out_of_bounds"
SOFTMAX_ROWS, ATTENTION_ROWS = 8, 100
TRITON_MISTAKES = {
    "softmax_triton": {
        "padding_loaded_as_zero": lambda p: pictures.layers(p)["rows_wrong"].all(),
        "load_without_mask_or_other": lambda p: pictures.layers(p)["rows_wrong"].all(),
        "no_max_subtraction": nan_exactly_in(_rows_from(slice(0, 3), SOFTMAX_ROWS)),
        "row_stride_ignored": rows_exactly(_rows_from(slice(1, None), SOFTMAX_ROWS)),
        "one_stride_for_both": OUT_OF_BOUNDS,   # stores rows at the input's wider stride
        "no_division": every_element,
        "torch_softmax_in_wrapper": None, "eager_after_launch": None,
        "asserts_16_bit_input": RAISES,
        "load_without_mask": OUT_OF_BOUNDS, "load_without_mask_then_where": OUT_OF_BOUNDS,
        "store_without_mask": OUT_OF_BOUNDS,
    },
    "flash_triton": {
        "acc_not_rescaled": rows_exactly(_rows_from(slice(64, None), ATTENTION_ROWS)),
        "padded_scores_not_minus_inf": lambda p: pictures.layers(p)["rows_wrong"].all(),
        "no_scale": every_element, "no_final_division": every_element,
        "running_max_never_updated": every_element,
        "no_max_subtraction": nan_exactly_in(_rows_from(slice(0, 3), ATTENTION_ROWS)),
        "running_max_starts_at_zero": nan_exactly_in(_rows_from(slice(0, 3), ATTENTION_ROWS)),
        "wrapper_returns_sdpa": None, "wrapper_eager_no_launch": None,
        "asserts_16_bit_input": RAISES,
        "kv_loads_unmasked": OUT_OF_BOUNDS, "v_load_unmasked": OUT_OF_BOUNDS,
        "k_load_unmasked_then_where": OUT_OF_BOUNDS, "o_store_unmasked": OUT_OF_BOUNDS,
        "assumes_full_blocks": OUT_OF_BOUNDS,
    },
}


@pytest.fixture(scope="module")
def triton_pictures():
    """{exercise: {mutant: {"case", "picture", "error"}}} from tests/triton_pictures.py."""
    pytest.importorskip("triton")
    out = {}
    for exercise in TRITON_MISTAKES:
        proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "tests.triton_pictures", exercise],
                              cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TRITON_INTERPRET": "1"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[exercise] = json.loads(proc.stdout)
    return out


def test_every_triton_mistake_has_a_case_here():
    for exercise, cases in TRITON_MISTAKES.items():
        assert set(cases) == set(mutants(exercise)), exercise


@pytest.mark.parametrize("exercise", list(TRITON_MISTAKES))
def test_picture_marks_what_a_triton_mistake_damages(exercise, triton_pictures):
    wrong = []
    for name, marks in TRITON_MISTAKES[exercise].items():
        got = triton_pictures[exercise][name]
        picture = got["picture"]
        if marks == OUT_OF_BOUNDS:
            ok = got["case"] == OUT_OF_BOUNDS
        elif marks == RAISES:
            ok = bool(got["error"]) and picture is None
        elif marks is None:
            ok = not got["error"] and picture is None
        else:
            ok = not got["error"] and picture is not None and marks(picture)
            ok = ok and pictures.render(picture)[:8] == b"\x89PNG\r\n\x1a\n"
        if not ok:
            wrong.append((name, got["error"], picture and (picture["kind"], picture["rows_wrong"],
                                                           picture["wrong_count"], picture["size"])))
    assert wrong == [], wrong


def test_the_solutions_draw_nothing():
    rng = np.random.default_rng(1)
    Q, K, V, _ = max_moves(rng)
    for module in (mutated("tiled_attention", "full_score_matrix"), mutated("tiled_attention", None)):
        assert _tiled(module, Q, K, V) is None


# ----------------------------------------------------------------- one grade, as people see it


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A batch of two submissions over the core exercises (CPU layers, public checks): one
    mistake in each exercise (GRADED), and the stubs. Its folder."""
    base = tmp_path_factory.mktemp("pages")
    subs = base / "subs"
    copy_solutions(subs / "mistakes", {f"{ex}.py": mutants(ex)[name].apply(
        (SOLUTIONS / f"{ex}.py").read_text()) for ex, name in GRADED.items()})
    shutil.copytree(EXERCISES, subs / "stubs", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(subs), "--out", str(base / "out"),
                           "--exercises", ",".join(GRADED), "--layers", "cpu,adversarial,interp",
                           "--no-hidden"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return base / "out"


def report_of(graded, name="mistakes") -> dict:
    return json.loads((graded / "reports" / f"{name}.json").read_text())


def test_each_pictured_failure_marks_the_damage(graded):
    tests = {t["name"]: t for t in report_of(graded)["tests"]}
    pictured = {n: t["picture"] for n, t in tests.items() if t["picture"]}
    assert all(tests[n]["status"] == "failed" for n in pictured)
    # a missing alpha: every row of these checks has its max in the last key block
    for check in ("tiled_attention.max_in_last_block", "flash_triton.max_in_last_block"):
        p = pictured[check]
        assert "0" not in p["rows_wrong"] and p["wrong_count"] >= 0.95 * p["size"], check
        assert p["grid"][0] in (32, 64), p["grid"]   # drawn on the grid of query blocks
    # padding loaded as 0 in rows of negative values only: the padded lanes take the weight of
    # every row (the elements near 0 stay within the tolerance)
    p = pictured["softmax_triton.all_negative_rows"]
    assert "0" not in p["rows_wrong"] and p["wrong_count"] > 0
    # exp(x) overflows: NaN where x is large (the input is all large here)
    p = pictured["online_softmax.no_overflow"]
    assert p["kind"] == "nan" and "0" not in p["rows_wrong"]
    # the stubs draw nothing
    assert not any(t["picture"] for t in report_of(graded, "stubs")["tests"])
    assert not (graded / "reports" / "pictures").exists()   # each page inlines its own


def test_report_page_is_one_file_with_nothing_from_the_network(graded):
    page = (graded / "reports" / "mistakes.html").read_text()
    assert not ADDRESS.search(page), ADDRESS.search(page)
    assert "<script" not in page.lower() and "<link" not in page.lower() and "@import" not in page
    images = re.findall(r'<img src="([^"]*)"', page)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    lead = report_of(graded)["failures"][0]["lead"]
    # the lead failure first, its picture and hint before the table of every exercise
    head = page[:page.index("Score by exercise")]
    assert lead in head and "<img" in head and "Hint:" in head


def test_class_page_and_csv(graded):
    page = (graded / "class.html").read_text()
    assert not ADDRESS.search(page) and page.count('<img src="data:image/png;base64,') >= 3
    with open(graded / "class.csv", newline="") as f:
        rows = {r["check"]: r for r in csv.DictReader(f)}
    assert rows["tiled_attention.max_in_last_block"]["failed"] == "1"
    assert rows["tiled_attention.max_in_last_block"]["not_started"] == "1"
    assert "alpha" in rows["tiled_attention.max_in_last_block"]["common_hint"]
    # the mistakes ranked: each exercise's lead failure in the mistakes' report, none of the stubs'
    for check in ("tiled_attention.max_in_last_block", "flash_triton.max_in_last_block"):
        assert check in page[:page.index("<h2>Scores")]


def test_class_view_ranks_the_slowest_kernels_on_the_perf_layer():
    from grader.report import class_view

    def report(ratios):
        return {"tests": [{"name": "flash_triton.speed_vs_sdpa", "layer": "perf", "status": "passed",
                           "message": "; ".join(f"N={n}: 1 ms vs SDPA flash 0.5 ms = {r}x"
                                                for n, r in ratios)}]}
    found = class_view.slowest({"a": report([(1024, 1.2), (8192, 3.5)]), "b": report([(1024, 0.9)])})
    assert [(s["submission"], s["ratio"]) for s in found] == [("a", 3.5), ("b", 0.9)]
    assert class_view.plot_slowest(found)[:4] == b"\x89PNG"


def test_terminal_names_the_page_and_maps_the_lead_within_one_screen(tmp_path):
    from rich.console import Console

    from grader import report
    from grader.registry import CHECKS
    from grader.results import GradeReport, Result

    rng = np.random.default_rng(2)
    Q, K, V, rows = max_moves(rng)
    picture = _tiled(mutated("tiled_attention", "acc_not_rescaled"), Q, K, V)
    results = []
    for c in CHECKS:
        if c.layer in ("gpu", "perf"):
            results.append(Result(c, "not_run", 0.0, "not selected"))
        elif c.id == "tiled_attention.max_in_last_block":
            results.append(Result(c, "failed", 0.0, "max abs error 3.1 at [70, 2]",
                                  failure_hint="Is acc rescaled by alpha?", picture=picture))
        else:
            results.append(Result(c, "passed", c.points))
    rep = GradeReport("sub", "CPU only (test)", results, 1.0, ["cpu", "adversarial", "interp"],
                      {"gpu": "not selected", "perf": "not selected"})
    buf = io.StringIO()
    report.print_terminal(rep, Console(file=buf, width=100, soft_wrap=True, highlight=False),
                          page="reports/grade.html")
    text = buf.getvalue()
    assert "report page: reports/grade.html" in text
    assert len(text.rstrip("\n").split("\n")) <= 39
    band = [line for line in text.split("\n") if line.strip().startswith("rows ")]
    # rows 0-63 right, 64-127 wrong: the rows whose max moved, by query blocks of 32
    assert band and all(set(line.split()[-1]) == ({"#"} if int(line.split()[1].split("-")[0]) >= 64
                                                  else {"."}) for line in band), text
    # the same report's Gradescope output carries the picture, as HTML
    pngs = pictures.render_all(rep)
    tests = {t["number"]: t for t in report.to_gradescope(rep, pngs)["tests"]}
    lead = tests["tiled_attention.max_in_last_block"]
    assert lead["output_format"] == "html" and "data:image/png;base64," in lead["output"]
    assert all(t["output_format"] == "text" for n, t in tests.items() if n != lead["number"])


def test_the_page_shows_the_last_measure_beside_it(tmp_path):
    """`make bench` (here its --dry-run, synthetic numbers) writes reports/bench; the grade page
    beside it shows its Measure tables and plots, inline, and says it is not this grade's."""
    from grader import report
    from grader.registry import CHECKS
    from grader.results import GradeReport, Result

    bench = tmp_path / "bench"
    proc = subprocess.run([sys.executable, "-m", "tools.bench", "--dry-run", "--out", str(bench)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(bench / "measure.md", "a") as f:
        f.write("\n<script>alert(1)</script>\n")   # Markdown's raw HTML is text on the page
    rep = GradeReport("sub", "CPU only (test)", [Result(c, "passed", c.points) for c in CHECKS],
                      1.0, ["cpu"], {})
    report.write(rep, markdown_path=tmp_path / "grade.md")
    page = (tmp_path / "grade.html").read_text()
    measure = page[page.index("<h2>Measure (make bench)</h2>"):page.index("<h2>This run</h2>")]
    assert "not this grade" in measure and "<table>" in measure and "<script" not in measure
    plots = sorted(p.name for p in bench.glob("*.png"))
    assert plots and measure.count('<img src="data:image/png;base64,') == len(plots)
    assert not ADDRESS.search(page)
    report.write(rep, markdown_path=tmp_path / "alone" / "grade.md")   # no bench beside it
    assert "Measure (make bench)" not in (tmp_path / "alone" / "grade.html").read_text()


# ------------------------------------------------------------------------- a real browser


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("chromium is not installed: `apt-get install chromium` (make test installs it "
                    "when run as root), or the pages cannot be opened in a browser here")
    return found


def screenshot(browser: str, page, out) -> "np.ndarray":
    proc = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox",
                           "--force-color-profile=srgb", "--hide-scrollbars",
                           f"--screenshot={out}", "--window-size=1280,900", page.as_uri()],
                          capture_output=True, text=True, timeout=120, cwd=out.parent)
    assert out.is_file() and out.stat().st_size > 10_000, proc.stderr[-2000:]
    from PIL import Image

    return np.asarray(Image.open(out).convert("RGB"))


def on_screen(screen: np.ndarray, png: bytes) -> int | None:
    """The row of the screenshot where the picture's every row is found whole, in order (it
    is shown at its own size); None when it is not all on this screen."""
    from PIL import Image

    picture = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    rows = [screen[y].tobytes() for y in range(screen.shape[0])]
    probe = picture[picture.shape[0] // 2].tobytes()
    for y, row in enumerate(rows):
        x = row.find(probe)
        if x < 0 or x % 3:
            continue
        top = y - picture.shape[0] // 2
        if top >= 0 and top + picture.shape[0] <= len(rows) and all(
                rows[top + i][x:x + len(probe)] == picture[i].tobytes()
                for i in range(picture.shape[0])):
            return top
    return None


def test_pages_in_a_headless_browser(graded, tmp_path):
    browser = _chromium()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page = graded / "reports" / "mistakes.html"
    screen = screenshot(browser, page, shots / "report.png")
    lead = report_of(graded)["failures"][0]["lead"]
    png = next(re.finditer(r'<img src="data:image/png;base64,([^"]*)"', page.read_text())).group(1)
    import base64

    assert on_screen(screen, base64.b64decode(png)) is not None, \
        f"the picture of {lead} is not whole on the first screen: {shots / 'report.png'}"
    screenshot(browser, graded / "class.html", shots / "class.png")
    print(f"screenshots of the report page and the class page: {shots}")
