#!/usr/bin/env bash
# 2 GPUs (nvidia-h200-x2). The coded small path's all-gather / all-to-all in LL units with the look-ahead receive
# (call bb's llall2), except the rotated codecs on 16-bit tensors at two units a lane, which keep the round-tripped
# values (coded_lane_as_values); the reduce-scatter as on main (no look-ahead: call bb had it 0.2-0.4 us slower at
# 8-32 KB for int4 / int4h). Wheel hyb-ext, main-ext for the A B.
# Expectation against main: fp32 all-gather / all-to-all 10-35% faster at 8 KB-2 MB, bf16 all-gather fp8 / int6 8-32 KB
# ~10% faster, int4 / int4h 2 MB 7-25% faster, the rotated codecs' bf16 all-gather / all-to-all at 128-512 KB and
# every reduce-scatter even (same code as main's).
# Carry .wheels/main-ext .wheels/hyb-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use hyb-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments,collective_peer_timeout,collective_mismatch,collective_graph_replays \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-hyb-w$gpus.log 2>&1
echo "tests hyb W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-hyb-w$gpus.log | tail -8
for dt in bf16 fp32; do
  for v in main hyb main hyb; do
    use $v-ext > /dev/null
    DEV_DTYPE=$dt DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,2 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int6,int4,int4h,int6h DEV_THREADS=0 \
      timeout 60 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt $v: exit $? [$SECONDS s]"; sed "s/^/$dt $v /" /tmp/dx.log >> $OUT/dev-exchange.log
  done
done
use hyb-ext > /dev/null
for dt in bf16 fp32; do
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout 55 --csv $OUT/family-$dt.csv > /tmp/family-$dt.log 2>&1
  echo "family hyb $dt: exit $? [$SECONDS s]"; cat /tmp/family-$dt.log >> $L
done
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=coded_small_segments,collectives_vs_twin \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-hyb-w4-shared.log 2>&1
echo "tests hyb W=4 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-hyb-w4-shared.log | tail -4
if [ $SECONDS -lt 420 ]; then
  CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=coded_small_segments \
    timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-hyb-w8-shared.log 2>&1
  echo "tests hyb W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-hyb-w8-shared.log | tail -3
fi
