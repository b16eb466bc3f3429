"""bench_attn's rows of the registry: the exercise, and its public checks with points, layers and
hints (grader.registry gathers every exercise folder's rows)."""

from grader.schema import Check as _C, Exercise

EXERCISE = Exercise(
    "bench_attn", "Benchmarking attention", frozenset({"torch"}), "cpu",
    seconds={"cpu": 3, "adversarial": 4},   # its CPU layers in a grade on an H100 box (schedule.py)
    order=5)

CHECKS = [
    _C("bench_attn.backend_probe", "cpu", 2, "probe_backends reports each SDPA backend as working (with a time) or not",
       "Task 5: call sdpa under each sdpa_kernel(backend), catch RuntimeError, and record "
       "the time of those that run.",
       follows=("bench_attn.honest_timing",)),
    _C("bench_attn.honest_timing", "adversarial", 4, "time_proper: warm-up, rep timed calls each synchronised, median, against the grader's clock",
       "Break It 4c: warm up (the first call compiles), then time rep calls, sync() before "
       "starting the clock and after fn() (kernels launch asynchronously), and return the "
       "median in milliseconds."),
    _C("bench_attn.dishonest_timers", "adversarial", 2, "time_once_no_sync shows the compile, time_warm_no_sync only the launch",
       "Break It 4a and 4b: one cold call without sync measures the compile; after warm-up, "
       "one call without sync measures only the launch. Neither synchronises."),
    _C("bench_attn.sweep_rows", "cpu", 3, "run_sweep rows: one per N and impl, ms timed, tflops from ms, written as JSON",
       "Each row: N, impl, ms from time_proper on that impl at that N, tflops = "
       "4*B*H*N^2*D / ms / 1e9, peak_gb from peak_bytes; one row per (N, impl), written to "
       "out_path as JSON.",
       follows=("bench_attn.honest_timing",)),
    _C("bench_attn.oom_recorded", "adversarial", 2, "an out-of-memory run is recorded as None and the sweep goes on",
       "Catch torch.OutOfMemoryError per run, record ms/tflops/peak_gb as None, free the "
       "memory and go on with the next impl and N.",
       follows=("bench_attn.sweep_rows", "bench_attn.honest_timing")),
    _C("bench_attn.gpu_sweep", "gpu", 3, "the sweep on the GPU: naive memory grows ~4x per doubling, flash stays flat",
       "Naive attention writes S and P (N^2 each): its peak grows 4x per doubling of N; "
       "SDPA and yours keep only the output. peak_bytes: reset the peak, run, "
       "max_memory_allocated() minus the base.",
       follows=("bench_attn.sweep_rows", "bench_attn.oom_recorded", "bench_attn.honest_timing"),
       gpu_alone=True),   # it judges the GPU's free memory with nothing else on it
]
