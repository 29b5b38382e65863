#!/usr/bin/env bash
# 2 or 4 GPUs: the dynamic all-to-all's counts loaded all at once (wheel dyn) against skew2, A B A B:
# `bench moe --part a2a` at 8 KB-2 MB (dynamic / host-sized). Then on dyn the dynamic tests at W = 2.
# Carry .wheels/skew2-ext, .wheels/dyn-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
for v in skew2 dyn skew2 dyn; do
  use $v-ext > /dev/null
  timeout 60 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part a2a --a2a-sizes 8K,32K,128K,512K,2M --iters 20 \
    --timeout 55 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-ab.csv
done
ab_a2a $OUT/a2a-ab.csv skew2 dyn
use dyn-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_DYNAMIC_REPLAYS=300 timeout 90 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-dyn.log 2>&1
echo "dynamic tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-dyn.log | tail -6
