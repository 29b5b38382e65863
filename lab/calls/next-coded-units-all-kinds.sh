#!/usr/bin/env bash
# Ready (2 or 4 GPUs): lab/wip/coded-units-all-kinds.patch (wheel llall, built 2026-11-28 from main + the patch): the
# all-gather and all-to-all's coded small path in the reduce-scatter's LL units too (codes + scale on the wire, the
# receivers decode and rotate back) where each lane crossed as its round-tripped values in T (fp32 tensors: two
# vectors a lane). Expectation: all-to-all 8-512 KB 0.2-0.6 us faster (the sender no longer decodes and rotates back
# per destination), fp32 all-gather / all-to-all 20-40% faster (one vector a lane where two crossed), bf16
# all-gather unchanged or slower (every receiver now decodes W - 1 lanes where it stored them); the NaN caveat goes.
# Land only if the tests pass and nothing is slower; else keep the all-gather on round-tripped values.
# Carry .wheels/main-ext .wheels/llall-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use llall-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$gpus.log 2>&1
echo "tests llall W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$gpus.log | tail -6
for v in main llall main llall; do
  use $v-ext > /dev/null
  DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,2 DEV_KINDS=ag,a2a DEV_CODECS=fp16,fp8,int6,int4,int4h DEV_THREADS=0 timeout 80 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|ag|a2a) "
done
use llall-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=coded_small_segments \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-shared.log 2>&1
echo "tests llall W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w8-shared.log | tail -3
