"""softmax_long's benchmark for `make bench` (python -m tools.bench --only softmax_long): GB/s of
the student's softmax beside torch.softmax and a plain copy (out.copy_(x)), all three timed the
same way (the perf harness: refill, call, checksum), from 256 to 256K columns, float16 and
bfloat16, rows chosen so that each call moves 256 MiB. GB/s = 2 * rows * cols * 2 bytes / time:
one read and one write of the matrix (a long row read twice is charged the same bytes).
"""

from __future__ import annotations

from tools.bench.report import fmt
from tools.bench.spec import Benchmark, Plot, Trial

IMPLS = ("softmax", "torch.softmax", "copy")
COLS = (256, 1024, 4096, 16384, 65536, 262144)
ELEMENTS = 1 << 26                    # rows * cols: 128 MiB read and 128 MiB written
SHAPES = {"full": [(dt, ELEMENTS // c, c) for dt in ("float16", "bfloat16") for c in COLS],
          "quick": [("float16", ELEMENTS // 4096, 4096), ("float16", ELEMENTS // 65536, 65536)],
          "cpu": []}
CHECK_ELEMENTS = 1 << 22              # the correctness check's call: same width, fewer rows


def nbytes(row, ctx=None) -> float:
    return 2 * row["rows"] * row["cols"] * 2        # read once, write once, 2 bytes each


def plan(shapes, budget, profile, bhd):
    """The shapes whose input, output, a copy's output and the float64 reference of a timed
    request's checks fit (about 16 bytes per element)."""
    fits = [s for s in shapes if 16 * s[1] * s[2] <= budget]
    return fits, []


def trials(ctx, shapes):
    import torch

    from grader.judge.answers import gpu as g
    from tools.bench.harness import assert_near

    for dtype, rows, cols in shapes:
        markers, (x,) = ctx.inputs((rows, cols), 1, dtype)
        small_markers, (small,) = ctx.inputs((max(1, CHECK_ELEMENTS // cols), cols), 1, dtype)
        ref = torch.softmax(small.float(), dim=-1)
        out = torch.empty_like(x)
        # bfloat16's rounding is 8x float16's: the timed requests' checksums get 8x the slack
        slack = 8.0 if dtype == "bfloat16" else 1.0

        def base(**kw):
            return dict(dtype=dtype, rows=rows, cols=cols, bytes=nbytes(dict(rows=rows, cols=cols)), **kw)

        def trusted_check():
            err = float((torch.softmax(small, dim=-1).float() - ref).abs().max())
            if not err <= 1e-2:
                raise AssertionError(f"wrong result, max abs error {err:.2e}")

        yield Trial(base(impl="softmax"),
                    lambda: assert_near(ctx.worker("softmax_long").call("softmax", *small_markers).value,
                                        ref, "softmax", rel=1e-2),
                    lambda: ctx.student_ms(ctx.worker("softmax_long"), "softmax", markers, {},
                                           reference=lambda i: g.softmax_reference(i[0]),
                                           inputs=[x], slack=slack))
        yield Trial(base(impl="torch.softmax"), trusted_check,
                    lambda: ctx.trusted_ms(lambda t: torch.softmax(t, dim=-1), (x,)))
        yield Trial(base(impl="copy"), lambda: None,
                    lambda: ctx.trusted_ms(lambda t: out.copy_(t), (x,)))
        x = small = ref = out = None
        ctx.free()


def table(rows, report) -> list[str]:
    lines = ["## Softmax for rows of any length: GB/s by width", "",
             "GB/s = 2 x rows x cols x 2 bytes / time (one read and one write of the matrix); "
             "rows x cols = 2^26 (256 MiB moved per call); copy is out.copy_(x), timed the same "
             "way.", "",
             "| dtype | rows x cols | softmax GB/s | torch.softmax GB/s | copy GB/s | softmax / copy "
             "| softmax / torch |", "|---|---|---|---|---|---|---|"]
    by = {(r["dtype"], r["rows"], r["cols"], r["impl"]): r for r in rows}
    for dtype, n, c in sorted({(r["dtype"], r["rows"], r["cols"]) for r in rows},
                              key=lambda k: (k[0], k[2])):
        got = [by.get((dtype, n, c, impl), {}) for impl in IMPLS]
        rate = [r.get("gbs") for r in got]
        cells = [fmt(v) if v else (r.get("error") or "")[:60] for v, r in zip(rate, got)]
        share = [f"{rate[0] / rate[i]:.2f}" if rate[0] and rate[i] else "" for i in (2, 1)]
        lines.append(f"| {dtype} | {n} x {c} | {' | '.join(cells)} | {' | '.join(share)} |")
    return lines + ["", "![softmax_long](softmax_long_gbs.png)", ""]


def draw(ax, rows, report) -> bool:
    drawn = False
    for impl in IMPLS:
        for dtype, style in (("float16", "o-"), ("bfloat16", "s--")):
            pts = sorted((r["cols"], r["gbs"]) for r in rows
                         if r["impl"] == impl and r["dtype"] == dtype and r.get("gbs"))
            if pts:
                ax.semilogx(*zip(*pts), style, label=f"{impl} ({dtype})", base=2)
                drawn = True
    return drawn


def synthetic() -> list[dict]:
    """Made-up rows of an H200 (for --dry-run and the tests)."""
    rows = []
    for dtype, r, c in SHAPES["full"]:
        b = nbytes(dict(rows=r, cols=c))
        for impl, gbs in (("softmax", 3900.0), ("torch.softmax", 3600.0), ("copy", 4200.0)):
            rows.append(dict(dtype=dtype, rows=r, cols=c, impl=impl, bytes=b, ms=b / gbs / 1e6,
                             gbs=gbs, error=None))
    return rows


BENCHMARKS = (Benchmark(
    name="softmax_long", x_names=("dtype", "rows", "cols"), x_vals=SHAPES, providers=IMPLS,
    unit="gbs", formula="2 * rows * cols * 2 bytes / time", trials=trials, work=nbytes,
    plan=plan, table=table, synthetic=synthetic, order=45, gpu_only=True,
    plots=(Plot("softmax_long_gbs.png",
                lambda rows, r: "Softmax GB/s by row length = 2·rows·cols·2 B / time",
                "columns per row (rows x cols = 2^26)", "GB/s", draw, from_zero=True),)),)
