"""Pictures of where a failed answer is wrong: a small PNG per failed comparison, and the same
map as a few lines of text for the terminal.

Drawn by the trusted process after every worker has stopped, from `Result.picture` (the values
grader/judge/answers/pictured.py took where the comparison failed), never from anything a worker made.
Three panels, as Triton-Puzzles shows "Yours" beside "Spec": the student's output, the
reference, and |yours - spec| against the tolerance, on the grid of the exercise's tiles, wrong
cells outlined in red and the rows that hold them marked at the left; NaN and inf get colours of
their own. A 1-D output is drawn as curves instead.

matplotlib is imported only when there is something to draw (a grade with no failed comparison
never loads it), through its object API (Figure, FigureCanvasAgg: no pyplot, no display), with
its default settings rather than a matplotlibrc found in the current folder.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import numpy as np

from grader.results import FAILING, GradeReport

LIMIT = 40            # pictures per report: a grade with more failures draws the first ones
NAN, POSINF, NEGINF = "#d62dd6", "#ff7f0e", "#1f77b4"   # magenta, orange, blue
WRONG = "#e41a1c"


def layers(picture: dict) -> dict:
    """The arrays a picture draws, decoded from its JSON: got, expected and ratio per cell
    (NaN where not finite), wrong (bool per cell), special ("n", "+", "-" or "." per cell),
    rows_wrong and cols_wrong (bool per row / column of the slice)."""
    def numbers(rows):
        return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)

    def bits(text):
        return np.array([c == "1" for c in text], dtype=bool)

    ratio = numbers(picture["ratio"])
    return {"got": numbers(picture["got"]), "expected": numbers(picture["expected"]),
            "ratio": np.where(np.isnan(ratio), np.inf, ratio),
            "wrong": np.array([bits(row) for row in picture["wrong"]]),
            "special": np.array([list(row) for row in picture["special"]]),
            "rows_wrong": bits(picture["rows_wrong"]), "cols_wrong": bits(picture["cols_wrong"])}


BRIEF = ("kind", "shape", "slice", "rows", "cols", "row_step", "col_step", "grid", "wrong_count",
         "size", "rows_wrong", "cols_wrong", "wrong")


def brief(picture: dict | None) -> dict | None:
    """What the JSON report keeps of a picture: where it is wrong (the maps the picture draws,
    and its shape and grid), not the values; None without a picture."""
    return {k: picture[k] for k in BRIEF if k in picture} if picture else None


def pictured(report: GradeReport) -> list:
    """The failed results that carry a picture, in report order, at most LIMIT."""
    return [r for r in report.results if r.picture and r.status in FAILING][:LIMIT]


def render_all(report: GradeReport) -> dict[str, bytes]:
    """check id -> PNG of its failure's picture; {} (and matplotlib never imported) when no
    failure compared values."""
    results = pictured(report)
    if not results:
        return {}
    out = {}
    for r in results:
        try:
            out[r.check.id] = render(r.picture, r.check.id)
        except (ValueError, KeyError, TypeError, IndexError):   # a malformed picture: none
            continue
    return out


def _matplotlib():
    # imported here, after every worker has stopped, from site-packages (-I: nothing in the
    # current folder or the submission is on sys.path; the sandbox's workers cannot write there)
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    return matplotlib, Figure, FigureCanvasAgg, ListedColormap


def render(picture: dict, title: str = "") -> bytes:
    """The PNG of one picture (a few tens of KB)."""
    matplotlib, Figure, FigureCanvasAgg, ListedColormap = _matplotlib()
    data = layers(picture)
    with matplotlib.rc_context():
        matplotlib.rcdefaults()   # not a matplotlibrc of the current folder
        matplotlib.rcParams.update({"font.size": 8, "axes.titlesize": 9})
        line = picture["rows"] == 1
        fig = Figure(figsize=(9.6, 3.6 if line else 3.9), dpi=80, layout="constrained")
        FigureCanvasAgg(fig)
        if line:
            _curves(fig, picture, data)
        else:
            _maps(fig, picture, data, ListedColormap)
        fig.suptitle(_caption(picture, title), fontsize=9, x=0.01, ha="left")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80)
    return _palette(buf.getvalue())


def _palette(png: bytes) -> bytes:
    """The PNG in 128 colours (Pillow, which matplotlib needs anyway): a third of the bytes,
    the same picture to the eye."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(128, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _caption(p: dict, title: str) -> str:
    where = f" slice {tuple(p['slice'])} of {tuple(p['shape'])}" if p["slice"] else \
        f" shape {tuple(p['shape'])}"
    what = {"nan": "NaN where the reference is finite", "inf": "inf where the reference is finite",
            "values": "values outside the tolerance"}.get(p["kind"], p["kind"])
    head = f"{title}: " if title else ""
    case = f" {p['case']}" if p.get("case") else ""
    first = textwrap.wrap(f"{head}{p['what']}{case}", 150)
    return "\n".join(first[:2] + [f"{p['wrong_count']} of {p['size']} elements wrong ({what});"
                                  f"{where}; atol={p['atol']:.3g}, rtol={p['rtol']:.3g}"])


def _extent(p: dict) -> tuple:
    return (0, p["cols"], p["rows"], 0)   # cells drawn in element units: grid lines fall true


def _maps(fig, p: dict, d: dict, ListedColormap) -> None:
    axes = fig.subplots(1, 3, sharey=True)
    finite = d["expected"][np.isfinite(d["expected"])]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    for ax, key, name in ((axes[0], "got", "yours"), (axes[1], "expected", "spec")):
        im = ax.imshow(d[key], cmap="viridis", vmin=lo, vmax=hi, extent=_extent(p),
                       aspect="auto", interpolation="nearest")
        ax.set_title(name + (" (colours clipped to spec's range)" if key == "got" else ""))
        _special(ax, p, d, ListedColormap)
    fig.colorbar(im, ax=axes[:2], fraction=0.03, pad=0.01)
    ax = axes[2]
    with np.errstate(divide="ignore"):
        log = np.log10(np.where(np.isinf(d["ratio"]), 1e6, d["ratio"]))
    im = ax.imshow(np.clip(log, -3, 3), cmap="Greys", vmin=-3, vmax=3, extent=_extent(p),
                   aspect="auto", interpolation="nearest")
    overlay = np.zeros(d["wrong"].shape + (4,))
    overlay[d["wrong"]] = (0.89, 0.10, 0.11, 0.55)
    ax.imshow(overlay, extent=_extent(p), aspect="auto", interpolation="nearest")
    _special(ax, p, d, ListedColormap)
    ax.set_title("|yours - spec| / tolerance (log10); red: wrong")
    cb = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.01)
    cb.set_ticks([-3, 0, 3], labels=["1e-3", "1", ">1e3"])
    _row_marks(ax, p, d)
    for ax in axes:
        _grid(ax, p)
        ax.set_xlabel("column")
    axes[0].set_ylabel("row")


def _special(ax, p: dict, d: dict, ListedColormap) -> None:
    """NaN, inf and -inf cells of the student's output in colours of their own."""
    codes = np.select([d["special"] == "n", d["special"] == "+", d["special"] == "-"], [1, 2, 3], 0)
    if not codes.any():
        return
    cmap = ListedColormap([(0, 0, 0, 0), NAN, POSINF, NEGINF])
    ax.imshow(codes, cmap=cmap, vmin=0, vmax=3, extent=_extent(p), aspect="auto",
              interpolation="nearest")
    found = [name for code, name in ((1, "NaN"), (2, "inf"), (3, "-inf")) if (codes == code).any()]
    ax.text(0.99, 0.01, " ".join(found), transform=ax.transAxes, ha="right", va="bottom",
            fontsize=7, color="white", bbox=dict(facecolor=NAN if "NaN" in found else POSINF,
                                                  edgecolor="none", pad=1))


def _runs(mask) -> list[tuple[int, int]]:
    """[start, end) of every run of True in a 1-D mask."""
    out, start = [], None
    for i, bad in enumerate(list(mask) + [False]):
        if bad and start is None:
            start = i
        elif not bad and start is not None:
            out.append((start, i))
            start = None
    return out


def _row_marks(ax, p: dict, d: dict) -> None:
    """A red bar left of the panel beside every run of rows that holds a wrong element."""
    for a, b in _runs(d["rows_wrong"]):
        ax.plot([-0.03 * p["cols"]] * 2, [a, b], color=WRONG, lw=3, clip_on=False,
                solid_capstyle="butt")


def _grid(ax, p: dict) -> None:
    """Lines between the exercise's tiles (at most 40 of each; more would hide the picture)."""
    from matplotlib.ticker import MaxNLocator

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    rows, cols = p["grid"]
    if rows and 1 < p["rows"] / rows <= 40:
        for y in range(rows, p["rows"], rows):
            ax.axhline(y, color="white", lw=0.6, alpha=0.8)
        ax.set_yticks(range(0, p["rows"], rows))
    if cols and 1 < p["cols"] / cols <= 40:
        for x in range(cols, p["cols"], cols):
            ax.axvline(x, color="white", lw=0.6, alpha=0.8)
        ax.set_xticks(range(0, p["cols"], cols))
    ax.set_xlim(0, p["cols"])
    ax.set_ylim(p["rows"], 0)


def _curves(fig, p: dict, d: dict) -> None:
    """A 1-D output: yours and spec against the index; below, the error against the tolerance,
    wrong cells marked red, NaN and inf as ticks of their own colour at the top."""
    top, bottom = fig.subplots(2, 1, sharex=True)
    x = (np.arange(d["got"].shape[1]) + 0.5) * p["col_step"]
    top.plot(x, d["expected"][0], color="black", lw=1.2, label="spec")
    top.plot(x, d["got"][0], color="tab:blue", lw=1, ls="--", label="yours")
    for code, colour, name in (("n", NAN, "NaN"), ("+", POSINF, "inf"), ("-", NEGINF, "-inf")):
        at = x[d["special"][0] == code]
        if at.size:
            top.plot(at, [1.0] * at.size, "|", color=colour, ms=10, transform=top.get_xaxis_transform(),
                     label=f"yours is {name}", clip_on=False)
    top.legend(fontsize=7, loc="upper right")
    top.set_ylabel("value")
    ratio = np.clip(np.where(np.isinf(d["ratio"][0]), 1e6, d["ratio"][0]), 1e-3, 1e6)
    bottom.semilogy(x, ratio, color="gray", lw=1)
    bottom.axhline(1.0, color="black", lw=0.8, ls=":")
    bad = d["wrong"][0]
    bottom.plot(x[bad], ratio[bad], "s", color=WRONG, ms=3, label="wrong")
    bottom.set_ylabel("|err| / tol")
    for ax in (top, bottom):
        for a, b in _runs(bad):
            ax.axvspan(a * p["col_step"], b * p["col_step"], color=WRONG, alpha=0.12, lw=0)
    bottom.set_xlabel("index")
    cols = p["grid"][1]
    if cols and 1 < p["cols"] / cols <= 40:
        for ax in (top, bottom):
            for c in range(cols, p["cols"], cols):
                ax.axvline(c, color="gray", lw=0.5, alpha=0.6)
    bottom.set_xlim(0, p["cols"])


# ------------------------------------------------------------------------- the text map


def text_map(picture: dict, width: int = 48, height: int = 8) -> list[str]:
    """The wrong region as at most `height` + 1 lines: a legend, then one line per band of rows
    (a row block of the exercise's grid where they fit), one character per band of columns:
    '#' where an element is wrong, '.' where all are right. [] when there is no picture."""
    if not picture:
        return []
    d = layers(picture)
    R, C = picture["rows"], picture["cols"]
    wrong = d["wrong"]
    rs, cs = picture["row_step"], picture["col_step"]
    block = picture["grid"][0]
    # bands of whole row blocks where the exercise has them
    step = block * math.ceil(math.ceil(R / block) / height) if block else math.ceil(R / height)
    step = max(step, rs)
    fold = math.ceil(wrong.shape[1] / width)   # cells per character
    chars = math.ceil(wrong.shape[1] / fold)
    lines = [f"where it is wrong ('#', '.' right): rows down, {C} columns across in {chars} "
             f"characters" + (f"; bands of {step} rows ({step // block} blocks of {block})"
                              if block and step % block == 0 else "")]
    label = len(str(R - 1))
    for top in range(0, R, step):
        end = min(R, top + step)
        cells = wrong[top // rs: max(top // rs + 1, math.ceil(end / rs))]
        line = "".join("#" if cells[:, a:a + fold].any() else "."
                       for a in range(0, wrong.shape[1], fold))
        lines.append(f"rows {top:>{label}}-{end - 1:<{label}} {line}")
    return lines[:height + 1]


def write(directory, pngs: dict[str, bytes], write_bytes) -> dict[str, str]:
    """Each PNG as <directory>/<check id>.png through `write_bytes(path, data)` (atomic);
    {absolute path: SHA-256} of those written."""
    return {str((Path(directory) / f"{cid}.png").resolve()):
            write_bytes(Path(directory) / f"{cid}.png", png) for cid, png in pngs.items()}
