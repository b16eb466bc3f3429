#!/usr/bin/env bash
# One session on a GPU machine: everything docs/gpu/ records, in one go, under $1 (default
# reports/gpu). The numbers in docs/gpu/ came from this script on an NVIDIA H200.
#   1. make grade-gpu IMPL=solutions   (alone on the GPU: the perf layer times it)
#   2. the perf cases, alone too: softmax_triton and flash_triton on the gpu and perf layers for
#      the solutions (full marks), the stubs with the raise deleted (0) and a kernel that skips
#      the work on calls that look timed (0 on perf): python -m tools.gpu_mutants --perf
#   3. make bench IMPL=solutions       (alone: attn_bench.json, plots, the Measure table)
#   4. make grade-gpu on the stubs, and the Triton mutants on the gpu layer, side by side
# Each step fits in 10 minutes; run one alone with its line if the whole does not fit a slot.
set -u
out=${1:-reports/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/nvidia-smi.csv" 2>&1
{ date -u; python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; } > "$out/versions.txt" 2>&1
( time GRADER_SANITIZER_LOG="$out/sanitizer.log" timeout 540 make grade-gpu IMPL=solutions REPORTS="$out/solutions" ) > "$out/solutions.log" 2>&1
( time timeout 540 python3 -m tools.gpu_mutants --perf --out "$out/perf_cases.md" ) > "$out/perf_cases.log" 2>&1
( time timeout 150 make bench IMPL=solutions REPORTS="$out" ) > "$out/bench.log" 2>&1
( time timeout 300 make grade-gpu REPORTS="$out/stubs" ) > "$out/stubs.log" 2>&1 &
( time GRADER_SANITIZER_LOG="$out/sanitizer.log" timeout 300 python3 -m tools.gpu_mutants --out "$out/gpu_mutants.md" ) > "$out/gpu_mutants.log" 2>&1
wait
