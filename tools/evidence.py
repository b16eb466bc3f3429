"""python -m tools.evidence: where each check's verdict gets its evidence, as the Markdown table
docs/SECURITY.md holds between its `<!-- evidence -->` markers (tests/test_evidence.py keeps the
two equal, so every check of grader.registry, public and hidden, is in it).

The rule (docs/SECURITY.md, "What a verdict may rest on"): a verdict rests only on the answer,
checked against the grader's reference (for kernels, also against a replay of the recorded
launches), and on evidence gathered where student code cannot reach it. A check whose idea has
no such evidence is advice (Check.advice: 0 points). The kinds below are read from the registry
(the check's layer, its exercise's kernels, Check.advice) with the few checks whose evidence is
their own named in SPECIAL.
"""

from __future__ import annotations

from grader.registry import EXERCISES, all_checks

ANSWER = "answer"
REPLAYED = "answer; replay of its launches (provenance)"
GATED = "answer; outside memory count (the tiled gate)"
MEMORY = "outside memory count (cgroup, or VmHWM and sampled VmRSS); answer"
LANES = "replay of its launches, every lane bounds-checked there; answer"
SANITIZER = "sanitizer (compute-sanitizer's exit status and log); answer; replay"
CLOCK = "grader's clock (timed requests, checksums against references); answer"
TIMED = CLOCK + "; replay of one timed call per measurement (provenance)"
ADVICE = "advice: a read log built in the worker (no points)"
REPLAY_PEAK = "answer; replay of a timed call, its memory counted by the replay worker's allocator"

# checks whose evidence is not their layer's and exercise's usual one
SPECIAL = {
    "tiled_attention.memory_is_tiled": MEMORY,
    "tiled_attention.naive_matches_float64": ANSWER,
    "attention_backward.memory_is_linear": MEMORY,
    "softmax_triton.masked_accesses": LANES,
    "flash_triton.guard_bands": LANES,
    "flash_backward.masked_accesses": LANES,
    "softmax_long.masked_accesses": LANES,
    "flash_triton.memory_flat": REPLAY_PEAK,
    "flash_backward.memory_linear": REPLAY_PEAK,
    "flash_decode.merge_matches_one_pass": ANSWER,   # merge_partials: NumPy, not a kernel
    "flash_decode.merge_empty_split": ANSWER,
    "flash_decode.hidden_merge": ANSWER,
    "bench_attn.backend_probe": "answer (a time the grader's Clock can have measured)",
    "bench_attn.honest_timing": "answer (the times, against the grader's Clock)",
    "bench_attn.dishonest_timers": "answer (the times, against the grader's Clock)",
    "bench_attn.hidden_timer_arguments": "answer (the times, against the grader's Clock)",
    "bench_attn.sweep_rows": "answer (rows whose times the grader's Clock drew)",
    "bench_attn.oom_recorded": ANSWER,
    "bench_attn.gpu_sweep": "answer (the sweep's own memory figures, checked for their growth)",
}


def evidence(check) -> str:
    """Where `check`'s verdict gets its evidence, in words of the table."""
    if check.advice:
        return ADVICE
    if check.id in SPECIAL:
        return SPECIAL[check.id]
    if check.layer == "perf":
        return TIMED if EXERCISES[check.exercise].kernels else CLOCK
    if check.id.endswith(".sanitizer"):
        return SANITIZER
    if EXERCISES[check.exercise].kernels:
        return REPLAYED
    if check.exercise == "tiled_attention":   # every tiled call passes the memory gate
        return GATED
    return ANSWER


def table() -> str:
    """The Markdown table: one row per check of the registry, hidden ones included."""
    rows = ["| check | layer | points | evidence |", "|---|---|---|---|"]
    for c in all_checks(include_hidden=True).values():
        points = "advice" if c.advice else f"{c.points:g}" + (" (hidden)" if c.hidden else "")
        rows.append(f"| `{c.id}` | {c.layer} | {points} | {evidence(c)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
