#!/usr/bin/env bash
# The coded packet path (small segments, scaled codecs) encodes a batch of destinations' lanes together
# (wheel ilp = main + the change) against main (wheel ownx-ext). Why: a thread encoded its lane for each of
# the W - 1 destinations in turn, each encode a dependent chain (block-scale shuffles, quantization) between
# two volatile stores; the batch lets the chains interleave. Expectation at W = 4, 8-512 KB: coded
# reduce-scatter and all-to-all 0.4-0.8 us faster (of 5.9-7.5 published); all-gather and W = 2 unchanged.
# DEV_CALLS=200: the ranks' skew at each replay's start spread over 200 calls (20 put +-1 us on 5 us calls
# in call av). Tests at W = 4 and 8 (one shared GPU). Carry .wheels/ownx-ext .wheels/ilp-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use ilp-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments timeout 120 python3 -m pytest -q -s \
  tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$gpus.log 2>&1
echo "tests ilp W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$gpus.log | tail -4
for v in ownx ilp ownx ilp; do
  use $v-ext > /dev/null
  DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K DEV_KINDS=rs,a2a,ag DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 timeout 100 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs|ag|a2a) "
done
use ilp-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=coded_small_segments \
  timeout 240 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-shared.log 2>&1
echo "tests ilp W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w8-shared.log | tail -3
