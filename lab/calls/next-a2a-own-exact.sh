#!/usr/bin/env bash
# Ready (2 or 4 GPUs; nvidia-h200-x2 first, then a 4-GPU kind): lab/wip/a2a-own-exact.patch, the all-to-all's own segment
# copied exact instead of through the codec (kernel, twin, oracle, spec, accuracy prediction). Why: at W = 2 the
# coded all-to-all encodes twice what the all-gather does for the same link bytes (its own half too) and runs
# 1.67x / 1.94x NCCL (fp8 / int4, 128 MB, 2x H200) where the all-gather runs 2.15x / 3.04x. Expectation: W = 2 coded
# all-to-all 128-512 MB 10-20% faster, W = 4 3-8%; the exact call unchanged (a copy either way).
# Wheels (built from main + the patch): main-ext, ownx-ext. Carry .wheels/main-ext .wheels/ownx-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use ownx-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,uneven_all_to_all,mixed_cta_all_to_all \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-ownx.log 2>&1
echo "tests ownx W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ownx.log | tail -6
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized timeout 100 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider > $OUT/tests-ownx-dyn.log 2>&1
echo "tests ownx dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ownx-dyn.log | tail -3
for v in main ownx main ownx; do
  use $v-ext > /dev/null
  DEV_SIZES=8,32,128,512 DEV_KINDS=a2a DEV_CODECS=fp16,fp8,int6,int4 DEV_THREADS=0 timeout 100 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "^$v (kind|a2a)"
done
