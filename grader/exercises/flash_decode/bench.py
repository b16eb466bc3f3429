"""flash_decode's benchmark for `make bench` (extension track): GB/s against L, one line per
Hkv, at B = 8, Hq = 32, D = 128, float16, every sequence L keys long. GB/s = 2 * B * Hkv * L *
D * 2 bytes / time: K and V read once per call. On a GPU only (the interpreter is far too slow
at decode's sizes); each row checked against the float32 reference, then timed like the perf
layer.
"""

from __future__ import annotations

from tools.bench.plots import ceiling_line
from tools.bench.spec import Benchmark, Plot, Trial

DECODE_RUNS = ((8, 4096), (8, 16384), (8, 32768), (8, 65536), (8, 131072),
               (32, 4096), (32, 32768), (32, 131072))   # (Hkv, L)
B, HQ, D = 8, 32, 128


def nbytes(row, ctx=None) -> float:
    return 2 * row["B"] * row["Hkv"] * row["L"] * row["D"] * 2    # K and V, 2 bytes each


def plan(runs, budget, profile, bhd):
    """The (Hkv, L) whose K, V and the reference's float32 copies fit."""
    return [list(c) for c in runs if 3 * 2 * B * c[0] * c[1] * D * 2 <= budget], []


def trials(ctx, runs):
    import numpy as np

    from grader.judge.answers.inputs import tensor
    from tools.bench.harness import assert_near

    for Hkv, L in runs:
        row = dict(L=L, Hkv=Hkv, B=B, Hq=HQ, D=D, impl="flash_decode")
        row["bytes"] = nbytes(row)
        mq, (q,) = ctx.inputs((B, HQ, D), 1)
        mkv, (k, v) = ctx.inputs((B, Hkv, L, D), 2)
        lens = np.full(B, L, np.int32)
        markers = [*mq, *mkv, tensor(lens, "int32", device=ctx.device, poison=0.0)]
        yield Trial(
            row,
            lambda: assert_near(ctx.worker("flash_decode").call("flash_decode", *markers).value,
                                reference(q, k, v, lens), "flash_decode"),
            lambda: ctx.student_ms(ctx.worker("flash_decode"), "flash_decode", markers, {},
                                   reference=lambda i: reference(*i), inputs=[q, k, v, lens]))
        q = k = v = None
        ctx.free()


def reference(q, k, v, seq_lens):
    """flash_decode's answer in float32 on the GPU: the exercise's public reference, imported
    on the GPU path only (a row that cannot import it says so)."""
    from grader import registry

    return registry.exercise_module("flash_decode", "reference").gpu_decode_reference(
        q, k, v, seq_lens)


def draw(ax, rows, report) -> bool:
    drawn = False
    for hkv in sorted({r["Hkv"] for r in rows}):
        pts = sorted((r["L"], r["gbs"]) for r in rows if r["Hkv"] == hkv and r.get("gbs"))
        if pts:
            ax.semilogx(*zip(*pts), "o-", base=2, label=f"flash_decode, Hkv={hkv}")
            drawn = True
    copy = report["ceil"].get("copy_gbs")
    ceiling_line(ax, copy, "device copy, measured: {:.0f}")
    if copy:
        ax.axhline(0.6 * copy, color="gray", ls=":", label="0.6 of copy (full marks)")
    return drawn


def title(rows, report) -> str:
    r0 = rows[0] if rows else {}
    return (f"Decode GB/s = 2·B·Hkv·L·D·2 B / time (B={r0.get('B')}, Hq={r0.get('Hq')}, "
            f"D={r0.get('D')}, fp16)")


BENCHMARKS = (Benchmark(
    name="decode", x_names=("Hkv", "L"), x_vals={"full": DECODE_RUNS, "quick": DECODE_RUNS},
    providers=("flash_decode",), unit="gbs", formula="2 * B * Hkv * L * D * 2 bytes / time",
    trials=trials, work=nbytes, plan=plan, gpu_only=True, order=50,
    plots=(Plot("decode_gbs.png", title, "L (keys per sequence)", "GB/s", draw,
                from_zero=True),)),)
