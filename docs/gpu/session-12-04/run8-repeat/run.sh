#!/bin/bash
# repeatability: the perf layer of the solutions x5 (softmax_triton, flash_decode, softmax_long) and of a slow variant x5
mkdir -p $OUT/r2; cd $OUT/r2 && R=$OLDPWD; cd $R
T0=$(date +%s)
for i in 1 2 3 4 5; do
  [ $(( $(date +%s) - T0 )) -gt 400 ] && break
  python3 -I grader/__main__.py --submission solutions --layers perf --exercises softmax_triton,flash_decode,softmax_long --json $OUT/r2/p$i.json --quiet > $OUT/r2/p$i.log 2>&1; echo "p$i $(( $(date +%s) - T0 ))" >> $OUT/r2/times
  [ $(( $(date +%s) - T0 )) -gt 450 ] && break
  python3 -I grader/__main__.py --submission scratch_diag/slow --layers perf --exercises flash_decode --json $OUT/r2/s$i.json --quiet > $OUT/r2/s$i.log 2>&1; echo "s$i $(( $(date +%s) - T0 ))" >> $OUT/r2/times
done
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
