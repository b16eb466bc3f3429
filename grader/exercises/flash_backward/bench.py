"""flash_backward's benchmark for `make bench` (extension track): its flash_fwd and flash_bwd
(on its own o and L) against N, causal and not, beside SDPA's fastest backend forward and
backward (grader.judge.perf.baselines.sdpa_ms), at B = 1, H = 32, D = 128, float16.

FLOPs (grader.judge.perf.baselines.attention_flops): forward 4*B*H*N^2*D, halved when causal;
backward 2.5x the forward's (two matmuls forward, five backward). Every row is checked first
(flash_fwd's o and lse, flash_bwd's dq, dk, dv against float32 references), then timed like
the perf layer, and every timed request's outputs are verified afterwards.
"""

from __future__ import annotations

from tools.bench.report import cell, fmt
from tools.bench.spec import Benchmark, Plot, Trial

BWD_NS = {"full": [1024, 2048, 4096, 8192, 16384], "quick": [1024, 2048, 4096], "cpu": [48]}
TARGET_MS = 60.0    # per_call_ms's span for these rows: 40 timings per run, `make bench` ~2 min
GRAD_SLACK = 8.0    # checksum tolerance of the gradients (sums over N products, cancellation)


def flops(row, ctx=None) -> float:
    from grader.judge.perf.baselines import attention_flops

    return attention_flops(row["B"], row["H"], row["N"], row["D"], row["causal"],
                           row["pass"] == "bwd")


def plan(ns, budget, profile, bhd):
    """q, k, v, o, dO, dq, dk, dv and SDPA's kept graph and gradients: ~16 tensors."""
    B, H, D = bhd
    return [n for n in ns if 16 * B * H * n * D * 2 <= budget], []


def sdpa_rows(ctx, base, q, k, v, do, ref):
    """SDPA's fastest backend, forward and backward: two finished rows."""
    from grader.judge.perf import baselines
    from tools.bench.harness import assert_near

    def check(p, out):   # each backend's o, or (dq, dk, dv), against the float32 references
        names, got, refs = ((("o",), [out], ref["fwd"][:1]) if p == "fwd"
                            else (("dq", "dk", "dv"), out, ref["bwd"]))
        for name, x, r in zip(names, got, refs):
            assert_near(_Host(x), r, f"SDPA's {name}")

    best = baselines.sdpa_ms(q, k, v, causal=base["causal"], do=do, check=check,
                             backends=baselines.FASTEST_BACKENDS if ctx.device != "cpu"
                             else (None,),
                             timer=ctx.trusted_ms, target_ms=TARGET_MS)
    rows = []
    for p in ("fwd", "bwd"):
        ms, backend = best[p]
        row = dict(base, impl="sdpa", backend=None, **{"pass": p})
        if ms == float("inf"):
            row.update(ms=None, tflops=None,
                       error="; ".join(best["failed"])[:300] or "no SDPA backend ran")
        else:
            row.update(ms=ms, tflops=flops(row) / ms / 1e9, backend=backend, error=None)
        rows.append(row)
    return rows


class _Host:
    """A trusted tensor seen as the worker's answers are (.array), for assert_near."""

    def __init__(self, t):
        self.array = t.detach().float().cpu().numpy()


def trials(ctx, ns):
    """Per (N, causal): SDPA's rows, then the student's flash_fwd and flash_bwd. A missing
    file or a TODO is said once, then written in every row."""
    from grader import errors
    from grader.judge.answers import gpu as g

    state = {"missing": None if "flash_backward" in ctx.have
             else "flash_backward.py is not in the submission", "said": False}
    B, H, D = ctx.bhd
    for N in ns:
        for causal in (False, True):
            markers, (q, k, v, do) = ctx.inputs((B, H, N, D), 4)
            base = dict(N=N, B=B, H=H, D=D, causal=causal)
            ref = {"fwd": g.attention_lse_reference(q, k, v, causal=causal),
                   "bwd": g.attention_grads_reference(q, k, v, do, causal, dtype="float32")}
            yield sdpa_rows(ctx, base, q, k, v, do, ref)

            def explain(e, where=f"flash_backward at N={N}, causal={causal}"):
                text = ""
                if not (state["missing"] and state["said"]):
                    text = ctx.error(where, e)
                if isinstance(e, errors.NotImplementedByStudent):
                    state["missing"] = state["missing"] or text
                state["said"] = state["said"] or bool(state["missing"])
                return (state["missing"] or text)[:300]

            mine = Mine(ctx, markers, [q, k, v, do], ref, causal)
            fwd = Trial(dict(base, impl="mine", backend=None, **{"pass": "fwd"}), mine.check_fwd,
                        mine.time_fwd, explain)
            yield fwd
            bwd = dict(base, impl="mine", backend=None, **{"pass": "bwd"})
            if fwd.row["error"]:      # no o and L of its own: the forward's reason, once
                yield [dict(bwd, ms=None, tflops=None, error=fwd.row["error"])]
            else:
                yield Trial(bwd, mine.check_bwd, mine.time_bwd, explain)
            q = k = v = do = ref = mine = None
            ctx.free()


class Mine:
    """The student's flash_fwd and flash_bwd at one (N, causal): check, then time, each."""

    def __init__(self, ctx, markers, tensors, ref, causal):
        self.ctx, self.markers, self.tensors, self.ref = ctx, markers, tensors, ref
        self.kw = {"causal": causal}
        self.o_lse = None     # flash_fwd's own o and lse, as flash_bwd receives them

    def check_fwd(self):
        from grader.judge.answers.inputs import tensor
        from tools.bench.harness import assert_near

        got = self.ctx.worker("flash_backward").call("flash_fwd", *self.markers[:3],
                                                     **self.kw).value
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise AssertionError(f"flash_fwd returned {type(got).__name__}, not (o, lse)")
        for name, x, r in zip(("o", "lse"), got, self.ref["fwd"]):
            assert_near(x, r, f"flash_fwd's {name}")
        self.o_lse = [tensor(t.array, dt, device=self.ctx.device)
                      for t, dt in zip(got, ("float16", "float32"))]

    def time_fwd(self):
        from grader.judge.answers import gpu as g

        causal = self.kw["causal"]
        return self.ctx.student_ms(
            self.ctx.worker("flash_backward"), "flash_fwd", self.markers[:3], self.kw,
            reference=lambda i: g.attention_lse_reference(*i, causal=causal),
            inputs=self.tensors[:3], compare=compare(("o", "lse"), "flash_fwd"),
            target_ms=TARGET_MS)

    def bwd_args(self):
        return [*self.markers[:3], *self.o_lse, self.markers[3]]

    def check_bwd(self):
        from tools.bench.harness import assert_near

        grads = self.ctx.worker("flash_backward").call("flash_bwd", *self.bwd_args(),
                                                       **self.kw).value
        if not isinstance(grads, (tuple, list)) or len(grads) != 3:
            raise AssertionError(f"flash_bwd returned {type(grads).__name__}, not (dq, dk, dv)")
        for name, x, r in zip(("dq", "dk", "dv"), grads, self.ref["bwd"]):
            assert_near(x, r, f"flash_bwd's {name}")

    def time_bwd(self):
        from grader.judge.answers import gpu as g

        causal = self.kw["causal"]
        q, k, v, do = self.tensors
        # dO (argument 5) is refilled before each call; o and lse are the forward's, fixed
        return self.ctx.student_ms(
            self.ctx.worker("flash_backward"), "flash_bwd", self.bwd_args(), self.kw,
            reference=lambda i: g.attention_grads_reference(i[0], i[1], i[2], i[5], causal,
                                                            dtype="float32"),
            inputs=[q, k, v, None, None, do], arg=5, slack=GRAD_SLACK,
            compare=compare(("dq", "dk", "dv"), "flash_bwd"), target_ms=TARGET_MS)


def compare(names, what):
    """The full comparison of a timed call's fetched outputs (a tuple), within 1% of each
    reference's largest magnitude: a skipped or stale call shows."""
    def check(out, expected, case):
        from grader.judge.answers.compare import CheckFailed, assert_close

        if not isinstance(out, (tuple, list)) or len(out) != len(names):
            raise CheckFailed(f"{what}: the {case} returned {type(out).__name__}, not "
                              f"({', '.join(names)})")
        for name, x, r in zip(names, out, expected):
            assert_close(x, r, what=f"the {name} of {what}",
                         dtype="float32" if name == "lse" else "float16", case=case,
                         atol=1e-2 * max(1.0, float(r.abs().max())), rtol=1e-2)
    return check


def backward_markdown(rows, report=None) -> list[str]:
    """measure.md's flash_backward section: forward and backward, mine against SDPA's fastest
    backend, per N and causal; nothing when nothing was measured."""
    if not rows:
        return []
    by = {(r["N"], r["causal"], r["impl"], r["pass"]): r for r in rows}
    B, H, D = (rows[0].get(x, "?") for x in ("B", "H", "D"))
    lines = ["## flash_backward: forward and backward against SDPA (extension track)", "",
             f"B = {B}, H = {H}, D = {D}, float16. Forward FLOPs "
             "4 B H N^2 D, halved when causal; backward FLOPs 2.5x the forward. SDPA: the fastest "
             "backend at each N (its backward: torch.autograd.grad on a kept graph). Issue 12's "
             "targets: forward >= 0.9 of SDPA, backward >= 0.6.", "",
             "| N | causal | pass | mine ms | mine TFLOP/s | SDPA ms | SDPA TFLOP/s | SDPA backend "
             "| mine / SDPA (TFLOP/s) |", "|---|---|---|---|---|---|---|---|---|"]
    for N, causal, p in sorted({(r["N"], r["causal"], r["pass"]) for r in rows},
                               key=lambda x: (x[0], x[1], x[2] != "fwd")):
        m = by.get((N, causal, "mine", p), {})
        t = by.get((N, causal, "sdpa", p), {})
        ratio = (f"{m['tflops'] / t['tflops']:.2f}" if m.get("tflops") and t.get("tflops") else "")
        lines.append(f"| {N} | {'yes' if causal else 'no'} | {p} | "
                     f"{fmt(m.get('ms')) or cell(m.get('error'))} | {fmt(m.get('tflops'))} | "
                     f"{fmt(t.get('ms')) or cell(t.get('error'))} | {fmt(t.get('tflops'))} | "
                     f"{t.get('backend') or ''} | {ratio} |")
    return lines + ["", "![backward](backward_tflops.png)", ""]


def draw(ax, rows, report) -> bool:
    drawn = False
    for impl, p, style in (("mine", "fwd", "o-"), ("mine", "bwd", "s-"),
                           ("sdpa", "fwd", "o--"), ("sdpa", "bwd", "s--")):
        pts = sorted((r["N"], r["tflops"]) for r in rows
                     if r["impl"] == impl and r["pass"] == p and r.get("tflops"))
        if pts:
            ax.semilogx(*zip(*pts), style, base=2,
                        label=f"{'flash_' + p if impl == 'mine' else 'SDPA ' + p}")
            drawn = True
    mm = report["ceil"].get("matmul_tflops")
    if mm:
        ax.axhline(mm, color="gray", ls=":", label=f"fp16 matmul, measured: {mm:.0f}")
    return drawn


def title(rows, report) -> str:
    B, H, D = (rows[0].get(x, "?") for x in ("B", "H", "D")) if rows else ("?",) * 3
    return (f"flash_backward vs SDPA: B={B}, H={H}, D={D}, fp16 — "
            f"{report['ceil'].get('device', {}).get('name', '')}")


def synthetic() -> list[dict]:
    """Made-up rows for --dry-run and the tests (a counting model of a GB10, not data)."""
    rows = []
    for N in BWD_NS["full"]:
        for causal in (False, True):
            for impl, p, tflops in (("mine", "fwd", 40.0), ("mine", "bwd", 26.0),
                                    ("sdpa", "fwd", 88.0), ("sdpa", "bwd", 60.0)):
                row = dict(N=N, B=1, H=32, D=128, causal=causal, impl=impl,
                           backend="FLASH_ATTENTION" if impl == "sdpa" else None, error=None,
                           **{"pass": p})
                eff = tflops * (0.85 if causal else 1.0) * min(1.0, N / 4096) ** 0.3
                rows.append(dict(row, ms=flops(row) / eff / 1e9, tflops=eff))
    return rows


BENCHMARKS = (Benchmark(
    name="backward", x_names=("N", "causal"), x_vals=BWD_NS, providers=("mine", "sdpa"),
    unit="tflops", formula="4 * B * H * N^2 * D / time, halved when causal; backward 2.5x",
    trials=trials, work=flops, plan=plan, table=backward_markdown, synthetic=synthetic,
    order=60,
    plots=(Plot("backward_tflops.png", title, "N", "TFLOP/s (backward: 2.5x the forward's FLOPs)",
                draw, panels=(("non-causal", lambda r: not r["causal"]),
                              ("causal", lambda r: r["causal"])),
                n_ticks=True, from_zero=True),)),)
