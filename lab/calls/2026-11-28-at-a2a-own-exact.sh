#!/usr/bin/env bash
# lab/wip/a2a-own-exact.patch (the all-to-all's own segment copied exact, not through the codec) on a 4-GPU
# machine: twin tests of the ownx wheel at W = 2 (GPUs 0-1) and W = 4, then main / ownx A B A B of the
# all-to-all at 8-512 MB at each W. Expectation: W = 2 coded all-to-all 128-512 MB 10-20% faster, W = 4 3-8%;
# exact unchanged. Carry .wheels/main-ext .wheels/ownx-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
for W in 2 $gpus; do
  vis=$(seq -s, 0 $((W - 1)))
  use ownx-ext > /dev/null
  CUDA_VISIBLE_DEVICES=$vis QR_TEST_WORLD_SIZE=$W QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,uneven_all_to_all,mixed_cta_all_to_all \
    timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-ownx-w$W.log 2>&1
  echo "tests ownx W=$W: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ownx-w$W.log | tail -6
  CUDA_VISIBLE_DEVICES=$vis QR_TEST_WORLD_SIZE=$W QR_TEST_SCENARIOS=dynamic_vs_host_sized timeout 100 python3 -m pytest -q -s \
    tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-ownx-dyn-w$W.log 2>&1
  echo "tests ownx dynamic W=$W: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ownx-dyn-w$W.log | tail -3
  for v in main ownx main ownx; do
    use $v-ext > /dev/null
    CUDA_VISIBLE_DEVICES=$vis DEV_SIZES=8,32,128,512 DEV_KINDS=a2a DEV_CODECS=fp16,fp8,int6,int4 DEV_THREADS=0 timeout 100 \
      python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange W=$W $v: exit $? [$SECONDS s]"; sed "s/^/W$W $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|a2a) "
  done
done
