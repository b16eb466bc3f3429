"""flash_triton's HBM bytes for `make bench` (`--only hbm`): the DRAM bytes one flash_fwd call
reads and writes, counted by Nsight Compute (tools.bench.ncu) at B = 1, H = 32, N = 8192,
D = 128 fp16 (a smaller N where that does not fit the memory budget), placed between the
lesson's counting model's two cases for the Q-block-outer flash forward:

    worst case  2Nd + 2N^2 d / Br  elements per head   (every K/V re-read from HBM)
    best case   4Nd                elements per head   (every K/V re-read hits in L2)
    bytes = elements x 2 (fp16) x B x H, Br = the kernel's BLOCK_M as launched

The bounds come from the student's own io_model (flash_bytes_worst, flash_bytes_l2) when it
gives the grader's formulas (grader/exercises/io_model/reference.py) exactly at this shape, else
from the grader's; the table says which. A measurement only, with no perf-layer points: ncu
replays the kernel with its caches flushed, and its counters need a permission a student's GPU
may not grant (tools/bench/ncu.py says more). Without ncu, or without that permission, the
section is one line.
"""

from __future__ import annotations


from tools.bench import ncu
from tools.bench.harness import Deadline, first_line
from tools.bench.report import fmt
from tools.bench.spec import Benchmark, Plot

HBM_N = {"full": [8192], "quick": [8192], "cpu": []}   # gpu_only: nothing to count on a CPU
TILE = (64, 64)                                         # BLOCK_M, BLOCK_N asked for
ELEM = 2                                                # fp16
TOL = 0.01                                               # of the bounds: rounding, the counters


def plan(ns, budget, profile, bhd):
    """The largest N <= the asked one whose tensors fit: the worker's q, k, v, o and the
    reference's (ceilings.attention_io_bytes, fp32 copies: twice that) plus a 1 GiB score block."""
    from grader.judge.machine import ceilings

    B, H, D = bhd
    todo, skipped = [], []
    for N in ns:
        n = N
        need = (lambda n: 3 * ceilings.attention_io_bytes(B, H, n, D, "float16") + (1 << 30))
        while n >= 512 and need(n) > budget:
            n //= 2
        if n >= 512:
            todo.append(n)
        else:
            skipped.append(dict(N=N, note=f"not run: N = 512 needs more than the "
                                          f"{budget / 1e9:.1f} GB budget"))
    return todo, skipped


def bounds(ctx, N: int, D: int, Br: int, Bc: int) -> tuple[float, float, str]:
    """(worst, best, source): the model's two cases in bytes for B x H heads, from the student's
    io_model where it equals the grader's formulas at this shape."""
    from grader.registry import exercise_module

    reference = exercise_module("io_model", "reference")
    judging = exercise_module("io_model", "judging")
    args = ((N, D, Br, Bc, ELEM), (N, D, ELEM))
    want = (reference.flash_bytes_worst(*args[0]), reference.flash_bytes_l2(*args[1]))
    heads = ctx.bhd[0] * ctx.bhd[1]
    source = "the grader's io_model formulas (your io_model.py is not in the submission)"
    if "io_model" in ctx.have:
        try:
            sub = ctx.worker("io_model", "cpu")
            got = tuple(judging.plain(sub.call(fn, *a).value, fn) for fn, a in
                        zip(("flash_bytes_worst", "flash_bytes_l2"), args))
            if all(judging.same(g, w, exact=True) for g, w in zip(got, want)):
                source = "your io_model (flash_bytes_worst, flash_bytes_l2)"
                return want[0] * heads, want[1] * heads, source
            source = (f"the grader's io_model formulas (yours give {got[0]!r:.20}, {got[1]!r:.20} "
                      f"at this shape, not {want[0]:,}, {want[1]:,})")
        except Deadline:
            raise
        except Exception as e:  # noqa: BLE001 - a TODO or a crash: the grader's formulas
            source = f"the grader's io_model formulas (yours: {first_line(e)[:100]})"
    return want[0] * heads, want[1] * heads, source


def place(read: float, written: float, best: float, worst: float, out: float) -> dict:
    """Where the reads sit between the bounds. Both cases write the output once (Nd per head,
    `out` bytes) and differ only in the K and V re-reads, so the reads are what is placed:
    "l2_share" 1 when every re-read hit in L2 (reads = best - out), 0 when none did (reads =
    worst - out); "x_best" = (read + written) / best. Writes can be short of `out`: what is
    still in L2 when the kernel ends is not counted."""
    lo, hi = best - out, worst - out
    ok = read > 0 and 0 < lo < hi
    share = 1 - (read - lo) / (hi - lo) if ok else None
    verdict = ("reads below the best case" if read < lo * (1 - TOL) else
               "reads above the worst case" if read > hi * (1 + TOL) else "reads between the bounds")
    return dict(l2_share=share, x_best=(read + written) / best if best else None,
                verdict=verdict, out=out)


def trials(ctx, values):
    """One finished row per N: flash_fwd's call under ncu, its answer checked here first."""
    if "flash_triton" not in ctx.have:
        return
    for N in values:
        row = dict(N=N, B=ctx.bhd[0], H=ctx.bhd[1], D=ctx.bhd[2], BLOCK_M=TILE[0],
                   BLOCK_N=TILE[1], read=None, written=None, bytes=None, worst=None, best=None,
                   source=None, kernels=None, launches=None, note=ncu.missing(), error=None)
        if row["note"] is None:
            measure(ctx, row)
        if row["note"]:
            print(f"bench: {row['note']}", flush=True)
        yield [row]
        ctx.free()


def measure(ctx, row: dict) -> None:
    """Fill `row` from one call under ncu; a failure becomes its note (ncu cannot count) or
    its error (the call)."""
    from grader.judge.answers import gpu as g
    from tools.bench.harness import assert_near

    markers, tensors = ctx.inputs((row["B"], row["H"], row["N"], row["D"]), 3)
    ref = g.attention_reference(*tensors)
    sub = ctx.worker("flash_triton")     # its sources (the call runs in a worker under ncu)
    timeout = min(ncu.TIMEOUT_S, getattr(sub, "timeout_s", ncu.TIMEOUT_S))   # the run's deadline

    def call(worker):
        r = worker.call("flash_fwd", *markers, BLOCK_M=TILE[0], BLOCK_N=TILE[1],
                        opts={"sync": True, "trace": True}, timeout=timeout)
        assert_near(r.value, ref, "flash_fwd")    # bytes of a wrong kernel are not its bytes
        return r.extras

    try:
        prof = ncu.profile(sub, "flash_triton", call)
    except ncu.Unavailable as e:
        row["note"] = str(e)
        return
    except Exception as e:  # noqa: BLE001 - the row says why it has no bytes
        row["error"] = f"{type(e).__name__}: {first_line(e)[:300]}"
        return
    # Br is the BLOCK_M the kernel was compiled with, whatever the wrapper did with the argument
    blocks = [c.get("constexprs", {}) for c in prof.extras.get("compiled") or ()]
    for key, asked in zip(("BLOCK_M", "BLOCK_N"), TILE):
        row[key] = next((b[key] for b in blocks if isinstance(b.get(key), int)), asked)
    row.update(read=prof.read, written=prof.written, bytes=prof.read + prof.written,
               kernels=prof.kernels, launches=len(prof.mine))
    row["worst"], row["best"], row["source"] = bounds(ctx, row["N"], row["D"], row["BLOCK_M"],
                                                      row["BLOCK_N"])
    row.update(place(row["read"], row["written"], row["best"], row["worst"], _output_bytes(row)))


def _output_bytes(row: dict) -> float:
    """The output's bytes: B x H x N x D fp16, written once in both cases."""
    return float(row["B"] * row["H"] * row["N"] * row["D"] * ELEM)


def size(x) -> str:
    """Bytes as MB below a GB, else GB (3 significant digits)."""
    if x is None:
        return ""
    return f"{fmt(x / 1e9)} GB" if x >= 1e9 else f"{fmt(x / 1e6)} MB"


def table(rows, report) -> list[str]:
    """Measure.md's section: one line when nothing was counted, else the bytes and the bounds."""
    lines = []
    for r in rows:
        if r.get("note"):
            lines += [f"**{r['note']}**" if r["note"].startswith(ncu.TITLE)
                      else f"**{ncu.TITLE}:** {r['note']}", ""]
            continue
        shape = (f"flash_fwd at B = {r['B']}, H = {r['H']}, N = {r['N']}, D = {r['D']} fp16, "
                 f"BLOCK_M = {r['BLOCK_M']} (Br), BLOCK_N = {r['BLOCK_N']}")
        lines += [f"## {ncu.TITLE}", ""]
        lines += ([f"{shape}: not measured: {r['error']}", ""] if r.get("error")
                  else counted(r, shape))
    return lines


def counted(r: dict, shape: str) -> list[str]:
    """A measured row: what was counted, the bounds and the bytes, where they sit."""
    launches = f"{r['launches']} launch{'es' if r['launches'] != 1 else ''}"
    where = ("" if r.get("l2_share") is None else
             f" L2 served {100 * max(0.0, min(1.0, r['l2_share'])):.1f}% of the K and V re-reads "
             f"the worst case makes (reads {fmt(r['read'] / (r['best'] - r['out']))}x the best "
             f"case's 3Nd).")
    short = r["out"] - r["written"]
    tail = (f" {size(short)} of the {size(r['out'])} output were still in L2 when the kernel "
            f"ended, so ncu did not count them as written." if short > TOL * r["out"] else "")
    return [f"{shape}. DRAM bytes counted by ncu (dram__bytes_read.sum, dram__bytes_write.sum) "
            f"over {launches} of {', '.join(r['kernels'])}, the kernels that built the inputs "
            f"left out; bounds from {r['source']}, x B x H.", "",
            "| | bytes | x best case |", "|---|---|---|",
            f"| best case: 4Nd elements per head (K and V re-read from L2) | "
            f"{size(r['best'])} | 1 |",
            f"| measured: read | {size(r['read'])} | |",
            f"| measured: written | {size(r['written'])} | |",
            f"| measured: read + written | {size(r['bytes'])} | {fmt(r.get('x_best'))} |",
            f"| worst case: 2Nd + 2N^2 d / Br elements per head (K and V from HBM) | "
            f"{size(r['worst'])} | {fmt(r['worst'] / r['best'])} |", "",
            f"Measured: {r['verdict']}.{where} ncu flushes the caches before the kernel.{tail}",
            ""]


def draw(ax, rows, report) -> bool:
    """Bars of the best case, the measured read + written (stacked), and the worst case, on a
    log scale (they are ~N / Br apart), each with its GB."""
    r = next((r for r in rows if r.get("bytes")), None)
    if r is None:
        return False
    ax.bar([0, 2], [r["best"] / 1e9, r["worst"] / 1e9], color=["0.75", "0.45"])
    ax.bar(1, r["read"] / 1e9, color="tab:blue", label="read")
    ax.bar(1, r["written"] / 1e9, bottom=r["read"] / 1e9, color="tab:orange", label="written")
    for x, value in ((0, r["best"]), (1, r["bytes"]), (2, r["worst"])):
        ax.text(x, value / 1e9, size(value), ha="center", va="bottom", fontsize=8)
    ax.set_xticks([0, 1, 2], ["best case\n4Nd (L2)", "measured\n(ncu)",
                              "worst case\n2Nd + 2N²d/Br"])
    ax.set_yscale("log")
    ax.set_ylim(bottom=min(r["best"], r["bytes"]) / 1e9 / 4, top=r["worst"] / 1e9 * 2)
    return True


def title(rows, report) -> str:
    r = next((r for r in rows if r.get("bytes")), rows[0] if rows else {})
    if r.get("note") or not r:
        return f"{ncu.TITLE}: not measured"
    return f"flash_fwd's DRAM bytes (ncu) and its bounds, N = {r['N']}, BLOCK_M = {r['BLOCK_M']}"


def synthetic():
    """An H200-like row: K and V mostly re-read from its 60 MB L2."""
    row = dict(N=8192, B=1, H=32, D=128, BLOCK_M=64, BLOCK_N=64, read=3.1e8, written=6.7e7,
               kernels=["_flash_fwd"], launches=1, note=None, error=None,
               source="your io_model (flash_bytes_worst, flash_bytes_l2)")
    N, d, Br, heads = 8192, 128, 64, 32
    row.update(bytes=row["read"] + row["written"], best=float(4 * N * d * ELEM * heads),
               worst=float((2 * N * d + 2 * N * N * d // Br) * ELEM * heads))
    row.update(place(row["read"], row["written"], row["best"], row["worst"], _output_bytes(row)))
    return [row]


HBM = Benchmark(name="hbm", x_names=("N",), x_vals=HBM_N, providers=("flash_fwd",),
                unit="gbs", formula="DRAM bytes read + written by the kernel, counted by ncu "
                                    "(not a rate: a count)",
                trials=trials, plan=plan, table=table, synthetic=synthetic, order=35,
                gpu_only=True,
                plots=(Plot("hbm_bytes.png", title, "", "GB (log scale)", draw),))
