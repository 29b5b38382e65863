#!/usr/bin/env bash
# The packet paths' pushes with a batch of destinations' loads in flight (wheel hoist, built from main +
# the change) against main (wheel ownx-ext = main since the own-segment change). Why: a volatile store
# orders the loads after it, so each destination's load waited for the previous send: W - 1 load
# latencies a lane (coded: plus W - 1 encodes in turn). Expectation at W = 4, 8-512 KB: coded reduce-scatter
# and all-to-all 0.5-1 us faster (of 5-7 us), exact reduce-scatter / all-to-all 0.3-0.6 us (of 3.8-5.4);
# the all-gather unchanged (one load a lane); W = 2 unchanged (one destination).
# Tests at W = 2 (GPUs 0-1), 4, and 8 on one shared GPU. Carry .wheels/ownx-ext .wheels/hoist-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use hoist-ext > /dev/null
SC=collectives_vs_twin,small_segments,coded_small_segments,fp32_all_reduce,collective_graph_replays
for W in $gpus 2; do
  vis=$(seq -s, 0 $((W - 1)))
  CUDA_VISIBLE_DEVICES=$vis QR_TEST_WORLD_SIZE=$W QR_TEST_SCENARIOS=$SC timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py \
    -p no:cacheprovider > $OUT/tests-w$W.log 2>&1
  echo "tests hoist W=$W: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$W.log | tail -7
done
CUDA_VISIBLE_DEVICES=0,1,2,3 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=passthrough_reference timeout 100 python3 -m pytest -q -s tests/gpu/test_dist.py \
  -p no:cacheprovider > $OUT/tests-ar-w4.log 2>&1
echo "tests hoist all-reduce W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ar-w4.log | tail -3
for v in ownx hoist ownx hoist; do
  use $v-ext > /dev/null
  DEV_SIZES=8K,32K,128K,512K,2 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 timeout 100 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs|ag|a2a) "
done
use hoist-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=collectives_vs_twin,small_segments,coded_small_segments \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-shared.log 2>&1
echo "tests hoist W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w8-shared.log | tail -5
