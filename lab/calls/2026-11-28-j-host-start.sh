#!/usr/bin/env bash
# 2 GPUs: why did the host-sized all-to-all get 0.3-0.5 us slower at 8-128 KB with wheel plan (call i)?
# plan2 = plan with a barrier before step 1 in the host-sized kernel again; plan3 = plan with step 3's
# old lane-0 steps loop and barrier. A B C A B C, `bench moe --part a2a` 8 KB-256 MB (dynamic / host).
# Carry .wheels/plan-ext, .wheels/plan2-ext, .wheels/plan3-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
for v in plan plan2 plan3 plan plan2 plan3; do
  use $v-ext > /dev/null
  timeout 40 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part a2a --iters 20 \
    --timeout 35 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-ab.csv
  [ $SECONDS -gt 230 ] && break
done
ab_a2a $OUT/a2a-ab.csv plan plan2 plan3
