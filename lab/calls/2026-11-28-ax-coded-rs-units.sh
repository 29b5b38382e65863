#!/usr/bin/env bash
# The coded reduce-scatter's small path with the codec's own bytes on the wire (wheel llrs = main + the change):
# each lane's codes and block scale in 8-byte LL units {32 payload bits, the call's mark, 16 payload bits}, one a
# lane for int4 / fp4 / int4h, two for int6 / fp8 / int8, where the decoded values crossed in fp32 (32 bytes a lane).
# Expectation, W = 4: coded reduce-scatter 8-32 KB 0.2-0.5 us faster (of ~5.9), 128-512 KB 1-3 us (of 6.1-9.7: the
# part that grew with the wire); the path now reaches 4x (int4) / 2x (int6, fp8) larger segments: at 1-4 MB
# it should beat the slice path (DEV_THREADS -1). All-gather and all-to-all unchanged.
# On 2 GPUs (4-GPU kinds withdrawn) the W = 2 part alone. Carry .wheels/ownx-ext .wheels/llrs-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use llrs-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments,collective_graph_replays \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$gpus.log 2>&1
echo "tests llrs W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$gpus.log | tail -6
if [ "$gpus" -gt 2 ]; then
CUDA_VISIBLE_DEVICES=0,1 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments timeout 120 python3 -m pytest -q -s \
  tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w2.log 2>&1
echo "tests llrs W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w2.log | tail -4
fi
for v in ownx llrs ownx llrs; do
  use $v-ext > /dev/null
  DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,1,2,4 DEV_KINDS=rs DEV_CODECS=fp16,fp8,int6,int4,int4h DEV_THREADS=0 timeout 100 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
done
use llrs-ext > /dev/null
DEV_CALLS=200 DEV_SIZES=1,2,4,8 DEV_KINDS=rs DEV_CODECS=fp8,int6,int4 DEV_THREADS=0,-1 timeout 100 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
echo "dev_exchange W=$gpus packets/slices: exit $? [$SECONDS s]"; sed "s/^/W$gpus llrs /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
[ "$gpus" -gt 2 ] && for v in ownx llrs; do
  use $v-ext > /dev/null
  CUDA_VISIBLE_DEVICES=0,1 DEV_CALLS=200 DEV_SIZES=8K,128K,512K,2,4,8 DEV_KINDS=rs DEV_CODECS=fp16,fp8,int4 DEV_THREADS=0,-1 timeout 100 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=2 $v: exit $? [$SECONDS s]"; sed "s/^/W2 $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
done
use llrs-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=coded_small_segments \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-shared.log 2>&1
echo "tests llrs W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w8-shared.log | tail -3
