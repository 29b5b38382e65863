#!/usr/bin/env bash
# 2x H200. t128-ext = main at 24c9827. The h200-w2 table had no fp32 entries for the segment collectives, so fp32
# `auto:<codec>` ran the exact call at 2 MB (reduce-scatter auto:int4 8.1 us against int8 5.1). Tune fp32 (segment
# collectives, 8K:1G:2), merge with the bf16 tune CSV in the tree (results/h200-x2/tune.csv) into one table, and run
# the fp32 family with it. Expectation: fp32 auto:int4 within 3% of the fastest codec at every size.
# (First run: tune exited 2, the all-reduce is always timed and needs a 16-bit dtype: --dtypes bf16,fp32 re-tunes both
# and both families run with that table.)
# Carry .wheels/t128-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use t128-ext > /dev/null
timeout 200 python3 -m quickreduce.cli tune --no-multicast --gpus $gpus --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16,fp32 \
  --sizes 8K:1G:2 --timeout 195 --csv $OUT/tune-w2.csv --out $OUT/tuned-w2.json --no-cache >> $L 2>&1
echo "tune fp32: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w2.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w2.json
for dt in bf16 fp32; do
  timeout 120 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout 115 --csv $OUT/family-$dt.csv > /tmp/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"; cat /tmp/family-$dt.log >> $L
done
