#!/usr/bin/env bash
# The coded reduce-scatter in LL units, two units a lane up to 32768 lanes and one for int4 / fp4 / int4h beyond
# (wheel llrs2 = main + lab/wip/coded-rs-units.patch as landed) against main (ownx-ext), on 2 GPUs; then W = 8 on one
# shared GPU. Expectation: int4 / int4h at 8-512 KB as fp8 on two units in call ax (2.7-4.3 us), from 1 MB as llrs.
# Carry .wheels/ownx-ext .wheels/llrs2-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use llrs2-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments timeout 120 python3 -m pytest -q -s \
  tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$gpus.log 2>&1
echo "tests llrs2 W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$gpus.log | tail -5
for v in ownx llrs2; do
  use $v-ext > /dev/null
  DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,1,2,4 DEV_KINDS=rs DEV_CODECS=fp16,fp8,int6,int4,int4h DEV_THREADS=0 timeout 60 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
done
use llrs2-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=coded_small_segments \
  timeout 170 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-shared.log 2>&1
echo "tests llrs2 W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w8-shared.log | tail -3
