"""flash_triton's benchmarks for `make bench`, at one N (TILE_N) with B = 1, H = 32, D = 128:
  backends: every SDPA backend (forced with sdpa_kernel), each output checked, then timed;
  tiles:    the student's flash_fwd at the tile shapes that fit this chip's shared memory
            (its profile's list), plus Break It 5's 256 x 256 (expected: out of resources);
  hbm:      the DRAM bytes of one flash_fwd call at N = 8192, counted by Nsight Compute,
            between the IO model's worst and best cases (bench_hbm.py).
TFLOP/s = 4*B*H*N^2*D / time (grader.judge.perf.baselines.attention_flops).
"""

from __future__ import annotations

import re

from grader.exercises.flash_triton.bench_hbm import HBM
from tools.bench.report import cell, fmt
from tools.bench.spec import Benchmark, Trial

BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")
BREAK_IT_5 = (256, 256, 8, 3)          # BLOCK_M = BLOCK_N = 256 with D = 128: too much SRAM
TILE_N = {"full": 4096, "quick": 4096, "cpu": 32}        # the N of both benchmarks
# tile shapes per kind of run: None, the profile's list; an int, its largest few; or the list
TILES = {"full": None, "quick": 3, "cpu": [(16, 16, 4, 1)]}


def flops(row, ctx) -> float:
    from grader.judge.perf.baselines import attention_flops

    B, H, D = ctx.bhd
    return attention_flops(B, H, row["N"], D)


def case(ctx):
    """Fresh q, k, v at this run's N, and their float32 reference."""
    from grader.judge.answers import gpu as g

    N = TILE_N[ctx.plan["size"]]
    markers, tensors = ctx.inputs((ctx.bhd[0], ctx.bhd[1], N, ctx.bhd[2]), 3)
    return N, markers, tensors, g.attention_reference(*tensors)


def backend_trials(ctx, names):
    """Each SDPA backend forced with sdpa_kernel: its output checked, then timed here."""
    import torch.nn.functional as F

    from grader.judge.perf.baselines import backend_context
    from tools.bench.harness import first_line

    N, _, (q, k, v), ref = case(ctx)

    def check(name):
        with backend_context(name):
            out = F.scaled_dot_product_attention(q, k, v)
        err = float((out.float() - ref).abs().max())
        if not err <= 2e-2:
            raise AssertionError(f"wrong result, max abs error {err:.2e}")

    def timed(name):
        with backend_context(name):
            return ctx.trusted_ms(F.scaled_dot_product_attention, (q, k, v))

    for name in names:
        yield Trial(dict(N=N, backend=name), lambda n=name: check(n), lambda n=name: timed(n),
                    explain=lambda e: first_line(e)[:200] or type(e).__name__)
    ctx.free()


def plan_tiles(tiles, budget, profile, bhd):
    """The tile shapes to try: the chip profile's (or its largest few), or the ones given."""
    if tiles is None or isinstance(tiles, int):
        shapes = [list(c) for c in profile.flash_configs]
        return (shapes if tiles is None else shapes[-tiles:]), []
    return [list(c) for c in tiles], []


def tile_trials(ctx, configs):
    """flash_fwd at each tile shape, then Break It 5's: its output checked against the float32
    reference, then timed like the perf layer. A wrapper without num_warps / num_stages gets
    BLOCK_M and BLOCK_N alone from then on."""
    from grader import errors
    from grader.judge.answers import gpu as g
    from tools.bench.harness import assert_near

    if "flash_triton" not in ctx.have:
        return
    N, markers, tensors, ref = case(ctx)
    state = {"warps": True}
    for cfg in list(configs) + [list(BREAK_IT_5)]:
        row = dict(N=N, BLOCK_M=cfg[0], BLOCK_N=cfg[1], num_warps=cfg[2], num_stages=cfg[3],
                   break_it=list(cfg) == list(BREAK_IT_5))
        if not state["warps"]:
            row.update(num_warps=None, num_stages=None)
        kw = dict(BLOCK_M=cfg[0], BLOCK_N=cfg[1], **({"num_warps": cfg[2], "num_stages": cfg[3]}
                                                       if state["warps"] else {}))

        def check(kw=kw, row=row):
            sub = ctx.worker("flash_triton")
            try:
                value = sub.call("flash_fwd", *markers, **kw).value
            except errors.StudentRaised as e:
                if not (state["warps"] and "unexpected keyword" in str(e)):
                    raise
                state["warps"] = False
                del kw["num_warps"], kw["num_stages"]
                row.update(num_warps=None, num_stages=None)
                value = sub.call("flash_fwd", *markers, **kw).value
            assert_near(value, ref, "flash_fwd")

        def timed(kw=kw):
            return ctx.student_ms(ctx.worker("flash_triton"), "flash_fwd", markers, kw,
                                  reference=lambda i: g.attention_reference(*i), inputs=tensors)

        yield Trial(row, check, timed, explain=tile_error)
    ctx.free()


def tile_error(e) -> str:
    """"out of resources: shared memory" is the expected one (Break It 5)."""
    message = str(e).strip()
    found = re.search(r"(OutOfResources[^\n]*|out of resources[^\n]*)", message)
    return (found.group(1) if found else f"{type(e).__name__}: {message}")[:300]


def backends_table(rows, report) -> list[str]:
    if not rows:
        return []
    lines = [f"## SDPA backends at N = {rows[0]['N']}", "", "| backend | ms | TFLOP/s |",
             "|---|---|---|"]
    lines += [f"| {b['backend']} | {fmt(b.get('ms')) or 'not available here'} | "
              f"{fmt(b.get('tflops'))} |" for b in rows]
    return lines + [""]


def tiles_table(rows, report) -> list[str]:
    if not rows:
        return []
    lines = [f"## flash_fwd tile shapes at N = {rows[0]['N']} (Break It 5 last)", "",
             "| BLOCK_M | BLOCK_N | num_warps | num_stages | ms | TFLOP/s | error |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {t['BLOCK_M']} | {t['BLOCK_N']} | {t.get('num_warps') or ''} | "
              f"{t.get('num_stages') or ''} | {fmt(t.get('ms'))} | {fmt(t.get('tflops'))} | "
              f"{cell(t.get('error'), 160)} |" for t in rows]
    return lines + [""]


def synthetic_backends():
    return [dict(N=4096, backend="CUDNN_ATTENTION", ms=None, tflops=None),
            dict(N=4096, backend="FLASH_ATTENTION", ms=3.1, tflops=88.7)]


def synthetic_tiles():
    return [dict(N=4096, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, ms=6.0, tflops=45.8,
                 error=None),
            dict(N=4096, BLOCK_M=256, BLOCK_N=256, num_warps=8, num_stages=3, ms=None,
                 tflops=None, error="OutOfResources: out of resources: shared memory, "
                                    "Required: 327680, Hardware limit: 101376")]


BENCHMARKS = (
    # x: the backend (its rows are its providers), at N = TILE_N
    Benchmark(name="backends", x_names=("backend",), x_vals={s: BACKENDS for s in TILES},
              providers=BACKENDS, unit="tflops", formula="4 * B * H * N^2 * D / time",
              trials=backend_trials, work=flops, table=backends_table,
              synthetic=synthetic_backends, json="tiles.json", order=20),
    # x: the tile shape (BLOCK_M, BLOCK_N, num_warps, num_stages), at N = TILE_N
    Benchmark(name="tiles", x_names=("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"),
              x_vals=TILES, providers=("flash_fwd",), unit="tflops",
              formula="4 * B * H * N^2 * D / time", trials=tile_trials, work=flops,
              plan=plan_tiles, table=tiles_table, synthetic=synthetic_tiles, json="tiles.json",
              order=30),
    # x: N (one); DRAM bytes of one call under ncu, not a time
    HBM,
)
