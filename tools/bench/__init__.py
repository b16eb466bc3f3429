"""The lesson's Measure section on this machine: `make bench` (python -m tools.bench).

    python -m tools.bench --submission exercises --out reports/bench [--quick]
    python -m tools.bench --dry-run --out /tmp/bench       # synthetic numbers, no GPU needed
    python -m tools.bench --device cpu --out /tmp/bench    # tiny sizes under TRITON_INTERPRET=1
    python -m tools.bench --submission solutions --only backward --out reports/bench_backward
    python -m tools.bench --submission solutions --only hbm --out reports/bench_hbm   # ncu

Benchmarks are data: each exercise folder with a bench.py declares its BENCHMARKS
(tools.bench.spec.Benchmark: x values, providers, formula, plots, table), and one runner
(tools.bench.runner) plans, checks and times them all and writes the report:
  1. ceilings, timed here (the trusted process):
       copy bandwidth   GB/s    = 2 * bytes / time           (a device copy reads and writes)
       fp16 matmul      TFLOP/s = 2 * n^3 / time, n = 8192
  2. plans the runs: each benchmark's x values for this kind of run, a size only if its
     tensors fit (estimated first, never allocated to find out: on a unified-memory GB10 that
     can stall the whole machine);
  3. runs every row: the submission's own code through the grader's launcher (the same sandbox
     and workers as grading), each row checked against a trusted reference first and then
     timed here on this process's clock like the perf layer (tools.bench.harness.measure_row,
     grader.judge.perf.timed_requests), every timed request's outputs verified afterwards;
     PyTorch's rows timed the same way; the SDPA baseline is grader.judge.perf.baselines (the
     fastest backend);
  4. writes each benchmark's json, its PNG plots, ceilings.json and measure.md: the Measure
     tables with the predictions from <submission>/predictions.md beside what was measured.

One benchmark counts instead of timing: hbm (grader/exercises/flash_triton/bench_hbm.py, `--only hbm`
alone), the DRAM bytes of one flash_fwd call at N = 8192 counted by Nsight Compute
(tools/bench/ncu.py), between the IO model's worst and best cases: hbm_bench.json,
hbm_bytes.png and its measure.md section. Without ncu, or without permission to read the GPU's
counters, that section is one line.

FLOPs (grader.judge.perf.baselines.attention_flops): 4*B*H*N^2*D forward, halved when causal;
the backward 2.5x the forward. Bytes for GB/s: each benchmark's declaration.
Without a CUDA GPU it says so in one line and runs only the benchmarks declared host=True:
the lesson's first Measure, the student's NumPy naive_attention and tiled_attention on the CPU
(grader/exercises/tiled_attention/bench.py), with its table, plots and measure.md.
"""
