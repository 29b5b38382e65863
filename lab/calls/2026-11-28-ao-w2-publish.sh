#!/usr/bin/env bash
# 2026-11-28 call ao (2 GPUs; nvidia-h200-x2): re-tune this machine (all-reduce and the family; the built-in h200-w2 table
# dates from 2026-11-26), then the all-reduce bench with every peer and the family with that table. Wheel main-ext.
# Carry .wheels/main-ext .peers
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
peers
use main-ext > /dev/null
timeout 200 python3 -m quickreduce.cli tune --no-multicast --gpus 2 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 195 --out $OUT/tuned-w2.json --csv $OUT/tune-w2.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w2.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w2.json
timeout 170 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --sizes 8K:1G --dtype bf16 --timeout 165 \
  --csv $OUT/bench-w2.csv --plot $OUT/bench-w2.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L
left=$((590 - SECONDS))
timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-bf16.csv > $OUT/family.log 2>&1
echo "family: exit $? [$SECONDS s]"
