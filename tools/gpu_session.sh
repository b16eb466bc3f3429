#!/usr/bin/env bash
# One session on a GPU machine: the grades and benchmarks behind docs/MEASUREMENTS.md, under OUT
# (default reports/gpu).
#   tools/gpu_session.sh OUT                  every step below, in order
#   tools/gpu_session.sh OUT solutions cheats one or more steps (each fits a 10-minute slot)
# Steps:
#   solutions   make grade-gpu IMPL=solutions, alone on the GPU (the perf layer times it), then the
#               direct compute-sanitizer test (pytest tests/test_attacks.py -k gpu)
#   cheats      every cheat and computes-nothing case on the gpu and perf layers (tools.gpu_cheats)
#   perf_cases  the solutions, the stubs with the raise deleted and a kernel that skips the work on
#               calls that look timed, on the gpu and perf layers (tools.gpu_mutants --perf)
#   mutants     the Triton mutants on the gpu layer (the sanitizer for those that drop a mask), with
#               make grade-gpu on the stubs beside them
#   bench       make bench IMPL=solutions (attn_bench.json, plots, the Measure table)
#   steady      a float16 variant of flash_decode and of flash_backward, 10 grades each of the gpu
#               layer's comparison with fresh seeds: the same full score every time (tools.gpu_repeat;
#               not in the default list)
#   perf_repeat the perf layer of the solutions 5 times in a row, then of a slow variant (flash_decode's
#               decode_fp16_elementwise_qk, on its band's slope) 5 times: each check's largest
#               difference between runs and how often its readings left the credit open
#               (tools/perf_repeat.py; issue 20; not in the default list; two 10-minute slots)
#   class       batch --gpus all over each shard in SHARD (default 0/8; "6/8 7/8": one after the other) of tools.gpu_batch's class of 20
#               (solutions, stubs, variants, wrong answers, mutants and cheats of tests/; every
#               exercise), then each of its submissions graded alone (ALONE=none: not): the two gradebooks side by
#               side and the submissions per hour (issue 20; not in the default list; a shard of
#               8, two or three submissions, fits a 10-minute slot on an H100: SHARD=2/8 ...; with
#               ALONE=none two eighths do: SHARD="6/8 7/8" ALONE=none, about 400 s)
set -u
out=${1:-reports/gpu}
shift || true
steps=${*:-solutions cheats perf_cases mutants bench}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$out/nvidia-smi.csv" 2>&1
{ date -u; python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; } > "$out/versions.txt" 2>&1
for step in $steps; do
  case $step in
    solutions)
      ( time timeout 420 make grade-gpu IMPL=solutions REPORTS="$out/solutions" ARGS="--sanitizer-log $out/sanitizer.log" ) > "$out/solutions.log" 2>&1
      ( time timeout 120 python3 -m pytest tests/test_attacks.py -q -s -k gpu ) > "$out/attacks-gpu.log" 2>&1 ;;
    cheats)
      ( time timeout 400 python3 -m tools.gpu_cheats --out "$out/cheats" --no-sanitizer --jobs 2 ) > "$out/cheats.log" 2>&1 ;;
    perf_cases)
      ( time timeout 420 python3 -m tools.gpu_mutants --perf --out "$out/perf_cases.md" ) > "$out/perf_cases.log" 2>&1 ;;
    mutants)
      ( time timeout 300 make grade-gpu REPORTS="$out/stubs" ) > "$out/stubs.log" 2>&1 &
      ( time timeout 420 python3 -m tools.gpu_mutants --out "$out/gpu_mutants.md" --sanitizer-log "$out/sanitizer.log" ) > "$out/gpu_mutants.log" 2>&1
      wait ;;
    bench)
      ( time timeout 400 make bench IMPL=solutions REPORTS="$out" ) > "$out/bench.log" 2>&1 ;;
    steady)
      ( time timeout 290 python3 tools/gpu_repeat.py --repeats 10 --jobs 5 ) > "$out/steady.log" 2>&1 ;;
    perf_repeat)
      ( time timeout 590 python3 tools/perf_repeat.py --out "$out/perf_repeat/solutions" ) > "$out/perf_repeat.log" 2>&1
      ( time timeout 590 python3 tools/perf_repeat.py --variant flash_decode/decode_fp16_elementwise_qk \
          --out "$out/perf_repeat/slow" ) >> "$out/perf_repeat.log" 2>&1 ;;
    class)
      for shard in ${SHARD:-0/8}; do
        ( time timeout 590 python3 -m tools.gpu_batch --out "$out/class-${shard/\//-of-}" --size 20 \
            --shard "$shard" --alone "${ALONE:-all}" --exercises online_softmax,tiled_attention,softmax_triton,flash_triton,bench_attn,flash_decode,attention_backward,flash_backward,io_model,softmax_long \
        ) > "$out/class-${shard/\//-of-}.log" 2>&1
      done ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
done
