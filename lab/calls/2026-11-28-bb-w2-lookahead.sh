#!/usr/bin/env bash
# 2 GPUs (nvidia-h200-x2). lab/wip/coded-units-all-kinds-lookahead.patch (wheel llall2-ext): the all-kinds LL units of
# call ba plus a look-ahead in the coded small path's receive (the next (lane, peer)'s units are loaded before the
# one in hand is decoded). Expectation: the rotated codecs' all-gather / all-to-all at 128-512 KB back to main's
# (call ba: llall 0.6-1.0 us slower there: each receiver decodes and rotates back a lane at a time), the
# reduce-scatter's rotated codecs at 512 KB 5.2-5.5 -> ~4 us, nothing slower than main.
# Then the W = 4 shared-GPU rerun of small_segments (llall crashed there in call az with a PeerTimeoutError at its
# first call; main passed), and the family with llall2 (bf16, fp32) in case it lands.
# Carry .wheels/main-ext .wheels/llall2-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use llall2-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments,collective_peer_timeout,collective_mismatch \
  timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-llall2-w$gpus.log 2>&1
echo "tests llall2 W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-llall2-w$gpus.log | tail -6
for dt in bf16 fp32; do
  for v in main llall2 main llall2; do
    use $v-ext > /dev/null
    DEV_DTYPE=$dt DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,2 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int6,int4,int4h,int6h DEV_THREADS=0 \
      timeout 60 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt $v: exit $? [$SECONDS s]"; sed "s/^/$dt $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs|ag|a2a) "
  done
done
for v in llall2 main; do
  use $v-ext > /dev/null
  CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=small_segments \
    timeout 70 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-$v-w4-shared.log 2>&1
  echo "tests $v W=4 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|Error" $OUT/tests-$v-w4-shared.log | cut -c1-300 | tail -4
done
use llall2-ext > /dev/null
for dt in bf16 fp32; do
  left=$((585 - SECONDS)); [ $left -lt 40 ] && break
  timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-$dt.csv > $OUT/family-$dt.log 2>&1
  echo "family llall2 $dt: exit $? [$SECONDS s]"
done
