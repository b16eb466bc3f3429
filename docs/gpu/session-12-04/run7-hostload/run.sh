#!/bin/bash
# 1) the full grade (verifies flash_triton's perf edit), 2) flash_decode.bandwidth alone x3, quiet vs busy CPU
set -x
nproc; date
( time make grade-gpu IMPL=solutions REPORTS=$OUT/sol > $OUT/sol.log 2>&1 ) 2> $OUT/sol.time
for i in 1 2 3; do
  python3 -I grader/__main__.py --submission solutions --layers perf --checks flash_decode.bandwidth --json $OUT/quiet$i.json --quiet > $OUT/quiet$i.log 2>&1
done
for i in 1 2 3; do
  pids=""
  for c in $(seq 16); do python3 -c "while True: pass" & pids="$pids $!"; done
  python3 -I grader/__main__.py --submission solutions --layers perf --checks flash_decode.bandwidth --json $OUT/busy$i.json --quiet > $OUT/busy$i.log 2>&1
  kill $pids
done
date
