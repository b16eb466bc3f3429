"""softmax_triton's benchmark for `make bench`: GB/s of the student's fused softmax and eager
softmax_eager (checked, then timed here like the perf layer) beside torch.softmax, on float16
rows. GB/s = 2 * rows * cols * 2 bytes / time: one read and one write of the matrix (the eager
version moves more, and is charged the same bytes).
"""

from __future__ import annotations

from tools.bench.plots import ceiling_line
from tools.bench.report import fmt, vs
from tools.bench.spec import Benchmark, Plot, Trial

SOFTMAX_IMPLS = ("softmax", "softmax_eager", "torch.softmax")
SHAPES = {"full": [(4096, 4096), (32768, 1024), (32768, 4096)], "quick": [(4096, 4096)],
          "cpu": [(8, 100)]}


def nbytes(row, ctx=None) -> float:
    return 2 * row["rows"] * row["cols"] * 2        # read once, write once, 2 bytes each


def plan(shapes, budget, profile, bhd):
    """The shapes whose input, output and the eager version's temporaries fit."""
    return [s for s in shapes if 8 * s[0] * s[1] * 2 <= budget], []


def trials(ctx, shapes):
    import torch

    from grader.judge.answers import gpu as g
    from tools.bench.harness import assert_near

    for rows, cols in shapes:
        markers, (x,) = ctx.inputs((rows, cols), 1)
        ref = torch.softmax(x.float(), dim=-1)

        def trusted_check():
            err = float((torch.softmax(x, dim=-1).float() - ref).abs().max())
            if not err <= 5e-3:
                raise AssertionError(f"wrong result, max abs error {err:.2e}")

        for name in SOFTMAX_IMPLS:
            row = dict(rows=rows, cols=cols, impl=name, bytes=nbytes(dict(rows=rows, cols=cols)))
            if name == "torch.softmax":
                yield Trial(row, trusted_check,
                            lambda: ctx.trusted_ms(lambda t: torch.softmax(t, dim=-1), (x,)))
                continue
            yield Trial(
                row,
                lambda n=name: assert_near(ctx.worker("softmax_triton").call(n, *markers).value,
                                           ref, n, rel=5e-3),
                lambda n=name: ctx.student_ms(ctx.worker("softmax_triton"), n, markers, {},
                                              reference=lambda i: g.softmax_reference(i[0]),
                                              inputs=[x]))
        x = ref = None
        ctx.free()


def table(rows, report) -> list[str]:
    preds, copy = report["preds"]["softmax"], report["ceil"].get("copy_gbs")
    lines = ["## Softmax: float16 rows", "",
             "GB/s = 2 x rows x cols x 2 bytes / time (one read and one write of the matrix; "
             "the eager version moves more, and is charged the same bytes).", "",
             "| shape | impl | predicted GB/s | measured GB/s | % of copy | ms |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        p = preds.get((r["rows"], r["cols"], r["impl"]), {})
        pct = f"{100 * r['gbs'] / copy:.0f}%" if r.get("gbs") and copy else ""
        got = vs(r.get("gbs"), p.get("gbs")) or (r.get("error") or "")[:120]
        lines.append(f"| {r['rows']} x {r['cols']} | {r['impl']} | {fmt(p.get('gbs'))} | {got} "
                     f"| {pct} | {fmt(r.get('ms'))} |")
    return lines + ["", "![softmax](softmax_gbs.png)", ""]


def draw(ax, rows, report) -> bool:
    drawn = False
    for impl in SOFTMAX_IMPLS:
        pts = sorted((r["bytes"] / 1e6, r["gbs"]) for r in rows if r["impl"] == impl
                     and r.get("gbs"))
        if pts:
            ax.semilogx(*zip(*pts), "o-", label=impl)
            drawn = True
    ceil = report["ceil"]
    ceiling_line(ax, ceil.get("copy_gbs"), "device copy, measured: {:.0f}")
    ceiling_line(ax, ceil.get("spec_bandwidth_gbs"), "spec sheet: {:.0f}", ls=":")
    return drawn


def synthetic() -> list[dict]:
    """Made-up rows of a GB10 (for --dry-run and the tests)."""
    rows = []
    for r, c in SHAPES["full"]:
        b = nbytes(dict(rows=r, cols=c))
        for impl, gbs in (("softmax", 230.0), ("softmax_eager", 52.0), ("torch.softmax", 190.0)):
            rows.append(dict(rows=r, cols=c, impl=impl, bytes=b, ms=b / gbs / 1e6, gbs=gbs,
                             error=None))
    return rows


BENCHMARKS = (Benchmark(
    name="softmax", x_names=("rows", "cols"), x_vals=SHAPES, providers=SOFTMAX_IMPLS,
    unit="gbs", formula="2 * rows * cols * 2 bytes / time", trials=trials, work=nbytes,
    plan=plan, table=table, synthetic=synthetic, order=40,
    plots=(Plot("softmax_gbs.png", lambda rows, r: "Softmax GB/s = 2·rows·cols·2 B / time (fp16)",
                "MB moved (read + write)", "GB/s", draw, from_zero=True),)),)
