"""bench_attn's benchmark for `make bench`: the student's own sweep (run_sweep) of naive
attention, SDPA and their flash_fwd against N, at B = 1, H = 32, D = 128, float16, forward.

run_sweep times itself (its timer is the exercise); the tool checks the rows it returns and
keeps the well-formed ones. TFLOP/s = 4*B*H*N^2*D / time; peak GB = CUDA memory allocated
beyond q, k, v during one call. Naive attention runs at N only if its S and P fit.
"""

from __future__ import annotations

import math

from tools.bench.plots import ceiling_line
from tools.bench.report import fmt, vs
from tools.bench.spec import Benchmark, Plot

IMPLS = ("naive", "sdpa", "mine")
NS = {"full": [512, 1024, 2048, 4096, 8192, 16384], "quick": [512, 1024, 2048, 4096],
      "cpu": [32, 64]}
# where each provider's function lives in the submission
WHERE = {"naive": ("bench_attn", "naive"), "sdpa": ("bench_attn", "sdpa"),
         "mine": ("flash_triton", "flash_fwd")}


def plan(ns, budget, profile, bhd):
    """The providers that fit at each N; the others as skipped rows with their note."""
    from grader.judge.machine import ceilings

    B, H, D = bhd
    todo, skipped = [], []
    for N in ns:
        impls = []
        for name in IMPLS:
            need = (ceilings.naive_attention_bytes(B, H, N, D, "float16") if name == "naive"
                    else ceilings.attention_io_bytes(B, H, N, D, "float16"))
            if need <= budget:
                impls.append(name)
            else:
                skipped.append(dict(N=N, impl=name, ms=None, tflops=None, peak_gb=None,
                                    note=f"not run: needs ~{need / 1e9:.1f} GB, over the "
                                         f"{budget / 1e9:.1f} GB budget"))
        if impls:
            todo.append(dict(N=N, impls=impls))
    return todo, skipped


def trials(ctx, items):
    """run_sweep one N at a time with the providers planned there: finished rows (the sweep
    times itself). A broken or missing flash_fwd leaves naive and sdpa; a TODO timer, none."""
    from grader import errors
    from grader.wire.codec import Trusted

    B, H, D = ctx.bhd
    have = {name for name, (module, _) in WHERE.items() if module in ctx.have}
    todo = "naive" not in have
    if todo:
        ctx.error("import", FileNotFoundError("bench_attn.py is not in the submission"))
    dtype = Trusted("dtype", params={"dtype": "float16"})
    for item in items:
        names = [name for name in item["impls"] if name in have]
        while names and not todo:
            impls = {name: Trusted("submission_function",
                                   params=dict(zip(("module", "name"), WHERE[name])))
                     for name in names}
            try:
                rows = ctx.worker("bench_attn").run_sweep(
                    Ns=[item["N"]], B=B, H=H, D=D, dtype=dtype, device=ctx.device,
                    out_path=None, impls=impls)
                yield clean(rows)
                break
            except (errors.StudentProblem, errors.GraderError) as e:
                ctx.error("bench_attn.run_sweep" + (f" at N={item['N']}" if "mine" not in names
                                                    else ""), e)
                if isinstance(e, errors.StudentTimeout):
                    from tools.bench.harness import Deadline

                    raise Deadline from None
                if "mine" in names:            # flash_fwd is a TODO or broken: naive and sdpa
                    names.remove("mine")
                    have.discard("mine")
                elif isinstance(e, errors.NotImplementedByStudent):
                    todo = True                # time_proper is a TODO: nothing can be timed
                else:
                    break


def _num(x):
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def clean(rows) -> list[dict]:
    """The sweep's well-formed rows (N, impl, ms, tflops, peak_gb), numbers or None."""
    return [dict(N=r["N"], impl=r["impl"], ms=_num(r.get("ms")), tflops=_num(r.get("tflops")),
                 peak_gb=_num(r.get("peak_gb")))
            for r in rows or [] if isinstance(r, dict) and r.get("impl") in IMPLS
            and isinstance(r.get("N"), int)]


def in_order(rows):
    return sorted(rows, key=lambda r: (r["N"], IMPLS.index(r["impl"])))


def table(rows, report) -> list[str]:
    B, H, D = report["bhd"]
    preds, mm = report["preds"]["attn"], report["ceil"].get("matmul_tflops")
    lines = [f"## Attention: B = {B}, H = {H}, D = {D}, float16, forward", "",
             "TFLOP/s = 4 B H N^2 D / time; peak GB = CUDA memory allocated beyond q, k, v "
             "during one call.", "",
             "| N | impl | predicted ms | measured ms | predicted peak GB | measured peak GB "
             "| TFLOP/s | % of matmul |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = preds.get((r["N"], r["impl"]), {})
        pct = f"{100 * r['tflops'] / mm:.0f}%" if r.get("tflops") and mm else ""
        measured_ms = vs(r.get("ms"), p.get("ms")) or r.get("note", "out of memory")
        lines.append(f"| {r['N']} | {r['impl']} | {fmt(p.get('ms'))} | {measured_ms} | "
                     f"{fmt(p.get('peak_gb'))} | {vs(r.get('peak_gb'), p.get('peak_gb'))} | "
                     f"{fmt(r.get('tflops'))} | {pct} |")
    if not rows:
        lines.append("| | no rows: see the problems above | | | | | | |")
    return lines + ["", "Plots: [time vs N](attn_time.png), [peak memory vs N](attn_memory.png), "
                    "[TFLOP/s vs N](attn_tflops.png).", "", "![time](attn_time.png)",
                    "![memory](attn_memory.png)", "![tflops](attn_tflops.png)", ""]


def series(rows, impl, key):
    pts = [(r["N"], r[key]) for r in rows if r["impl"] == impl and r.get(key)]
    return [p[0] for p in pts], [p[1] for p in pts]


def impl_lines(ax, rows, key: str, plot) -> bool:
    """One line per provider of column `key`; whether anything was drawn."""
    drawn = False
    for impl in IMPLS:
        xs, ys = series(rows, impl, key)
        if xs:
            plot(xs, ys, "o-", label=impl, base=2)
            drawn = True
    return drawn


def time_plot(ax, rows, report) -> bool:
    drawn = impl_lines(ax, rows, "ms", ax.loglog)
    anchor = next((p for impl in ("sdpa", "mine", "naive")
                   for p in reversed(list(zip(*series(rows, impl, "ms"))))), None)
    if anchor:
        ns = sorted({r["N"] for r in rows})
        c = anchor[1] / anchor[0] ** 2
        ax.loglog(ns, [c * n * n for n in ns], "--", color="gray", base=2, label="guide: time ∝ N²")
    return drawn


def memory_plot(ax, rows, report) -> bool:
    drawn = impl_lines(ax, rows, "peak_gb", ax.loglog)
    B, H, _ = report["bhd"]
    ns = sorted({r["N"] for r in rows})
    if ns:
        ax.loglog(ns, [2 * B * H * n * n * 2 / 1e9 for n in ns], ":", color="gray", base=2,
                  label="S and P: 2·B·H·N²·2 bytes")
    return drawn


def tflops_plot(ax, rows, report) -> bool:
    drawn = impl_lines(ax, rows, "tflops", ax.semilogx)
    ceiling_line(ax, report["ceil"].get("matmul_tflops"), "fp16 matmul, measured: {:.0f}")
    return drawn


def where(report) -> str:
    B, H, D = report["bhd"]
    return f"B={B}, H={H}, D={D}, fp16 — {report['ceil'].get('device', {}).get('name', '')}"


def synthetic() -> list[dict]:
    """A counting model of a GB10 (made-up numbers for --dry-run and the tests)."""
    from grader.judge.perf.baselines import attention_flops

    B, H, D = 1, 32, 128
    bw, tf = 273e9 * 0.8, 100e12
    rows = []
    for N in NS["full"]:
        flops = attention_flops(B, H, N, D)
        out_gb = B * H * N * D * 2 / 1e9
        naive_ms = max(4 * B * H * N * N * 2 / bw, flops / tf) * 1e3 * 1.2
        for impl, ms, peak in (("naive", naive_ms, 2 * B * H * N * N * 2 / 1e9 + out_gb),
                               ("sdpa", flops / 88e12 * 1e3 + 0.02, out_gb * 1.01),
                               ("mine", flops / 40e12 * 1e3 + 0.03, out_gb)):
            if impl == "naive" and N == 16384:
                rows.append(dict(N=N, impl=impl, ms=None, tflops=None, peak_gb=None,
                                 note="not run: needs ~34.6 GB, over the 30.0 GB budget"))
                continue
            rows.append(dict(N=N, impl=impl, ms=ms, tflops=flops / ms / 1e9, peak_gb=peak))
    return rows


BENCHMARKS = (Benchmark(
    name="attn", x_names=("N",), x_vals=NS, providers=IMPLS, unit="tflops",
    formula="4 * B * H * N^2 * D / time", trials=trials, plan=plan, table=table,
    finish=in_order, synthetic=synthetic, order=10,
    plots=(Plot("attn_time.png", lambda rows, r: f"Attention time vs N ({where(r)})", "N",
                "ms (median)", time_plot, n_ticks=True),
           Plot("attn_memory.png", lambda rows, r: f"Peak extra memory vs N ({where(r)})", "N",
                "GB", memory_plot, n_ticks=True),
           Plot("attn_tflops.png",
                lambda rows, r: f"Attention TFLOP/s = 4·B·H·N²·D / time ({where(r)})", "N",
                "TFLOP/s", tflops_plot, n_ticks=True, from_zero=True))),)
