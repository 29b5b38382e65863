#!/usr/bin/env bash
# 2 or 4 GPUs: the exchange start and plan with fewer barriers (wheel plan: counts read by warp 1 beside step 1,
# the plan's barriers 6 -> 3) against dyn, A B A B: `bench moe --part a2a` at 8 KB-2 MB; then on plan the GPU tests.
# Carry .wheels/dyn-ext, .wheels/plan-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
for v in dyn plan dyn plan; do
  use $v-ext > /dev/null
  timeout 60 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part a2a --a2a-sizes 8K,32K,128K,512K,2M --iters 20 \
    --timeout 55 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-ab.csv
done
ab_a2a $OUT/a2a-ab.csv dyn plan
use plan-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_DYNAMIC_REPLAYS=300 timeout 90 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-dyn.log 2>&1
echo "dynamic tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-dyn.log | tail -6
QR_TEST_WORLD_SIZE=$gpus QR_COLLECTIVE_REPLAYS=200 timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-coll.log 2>&1
echo "collective tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-coll.log | tail -12
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=50 QR_COLLECTIVE_REPLAYS=50 \
  QR_TEST_SCENARIOS=uneven_all_to_all,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts,collectives_vs_twin \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8.log 2>&1
echo "W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w8.log | tail -8
