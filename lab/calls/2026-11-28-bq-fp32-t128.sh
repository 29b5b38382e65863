#!/usr/bin/env bash
# 2x H200. t128-ext = main + 128-thread CTAs for the fp32 all-gather / all-to-all on 2 GPUs (call bp: coded 4-9% faster
# at 32-512 MB than 256); main-ext = main at d57d65b. Tests with t128 (the slice path forced: large segments, twin,
# uneven, mixed CTA, fp32 all-reduce), then the fp32 family with each (main, t128, main, t128: the bench's rows side
# by side) and the built-in table as of call bo; t128's family -> results/h200-x2/family-fp32.csv.
# Expectation: fp32 all-gather / all-to-all coded 4-9% faster at 32-512 MB, the reduce-scatter unchanged.
# Carry .wheels/main-ext .wheels/t128-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use t128-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,fp32_all_reduce,collective_graph_replays \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-t128.log 2>&1
echo "tests t128: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-t128.log | tail -8
export QUICKREDUCE_TUNE_FILE=$PWD/python/quickreduce/tuned/h200-w2.json
for v in main t128 main t128; do
  use $v-ext > /dev/null
  timeout 100 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype fp32 --sizes 8K:1G:4 --timeout 95 --csv /tmp/family-fp32.csv > /tmp/family-fp32.log 2>&1
  echo "family fp32 $v: exit $? [$SECONDS s]"; cat /tmp/family-fp32.log >> $L
  [ -f $OUT/ab-family.csv ] || sed -n 1p /tmp/family-fp32.csv | sed 's/^/variant,/' > $OUT/ab-family.csv
  sed 1d /tmp/family-fp32.csv | sed "s/^/$v,/" >> $OUT/ab-family.csv
  [ $v = t128 ] && cp /tmp/family-fp32.csv $OUT/family-fp32.csv
done
ab_family $OUT/ab-family.csv main t128 | grep -E "(33554432|134217728|536870912|8388608)" | grep -v nccl
