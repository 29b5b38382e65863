#!/usr/bin/env bash
# Ready (a 4-GPU kind; nvidia-h100-x4 may land on 4x H200): the coded small path in LL units (the reduce-scatter's
# and, since 88b1e31, the all-gather / all-to-all's but the rotated codecs' 16-bit ones; measured on 2x H200 only) at
# W = 4: tests, then main / ownx A B at 8 KB-4 MB (ownx-ext = main before either change), then the family republished
# at W = 4 and at W = 2 (GPUs 0-1) for the card it lands on.
# Expectation at W = 4: coded / exact from 1.41-1.83 (reduce-scatter), 1.23-1.38 (all-gather), 1.29-1.56 (all-to-all)
# (call aw) to at most ~1.4 at 8-512 KB; fp32 all-gather / all-to-all 10-35% faster than ownx.
# Wheels: .wheels/main-ext (main's C++ at 3cf7e0d, 2026-11-28's eighth sitting: two slices a step at W = 2),
# .wheels/ownx-ext. Carry both.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments,collective_graph_replays,collective_peer_timeout,collective_mismatch \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$gpus.log 2>&1
echo "tests main W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w$gpus.log | tail -6
for v in ownx main; do
  use $v-ext > /dev/null
  DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,1,2,4 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int6,int4,int4h DEV_THREADS=0 timeout 120 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/W$gpus $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
done
use main-ext > /dev/null
DEV_CALLS=200 DEV_SIZES=1,2,4,8 DEV_KINDS=rs DEV_CODECS=fp8,int4 DEV_THREADS=0,-1 timeout 80 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
echo "packets / slices W=$gpus: exit $? [$SECONDS s]"; sed "s/^/W$gpus main /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|rs) "
mkdir -p $OUT/w$gpus $OUT/w2
timeout 200 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 195 --csv $OUT/w$gpus/family-bf16.csv > $OUT/w$gpus/family-bf16.log 2>&1
echo "family W=$gpus: exit $? [$SECONDS s]"
for dt in bf16 fp32; do
  CUDA_VISIBLE_DEVICES=0,1 timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout 145 --csv $OUT/w2/family-$dt.csv > $OUT/w2/family-$dt.log 2>&1
  echo "family W=2 $dt: exit $? [$SECONDS s]"
done
