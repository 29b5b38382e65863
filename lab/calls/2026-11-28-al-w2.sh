#!/usr/bin/env bash
# 2026-11-28 call al (2 GPUs; nvidia-h200-x2, which has landed on 2x H100 before): main with the coded packet path capped
# at 512 KiB of wire a peer and the even all-to-all's CTA rule (wheel main-ext), and main before it (xg-ext).
#  1. W = 2 tests of the family on main-ext.
#  2. The coded packet reach at W = 2 on xg-ext (t0 = packets up to 2 MiB segments, t-1 = slices) and main-ext's rule.
#     Expectation: as at W = 4 (slices faster past ~512 KiB of wire), or packets reaching further (one peer).
#  3. Republish the family (bf16, fp32) and `bench moe` at W = 2 for this machine.
# Carry .wheels/main-ext .wheels/xg-ext (the family's peers are torch's: no .peers)
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments,collective_graph_replays,fp32_all_reduce \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -8
for v in xg main; do
  use $v-ext > /dev/null
  DEV_SIZES=256K,512K,1,2,4,8 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4 DEV_THREADS=0,-1 timeout 100 python3 lab/scripts/dev_exchange.py \
    > $OUT/dev-exchange-$v.log 2>&1
  echo "dev_exchange $v: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange-$v.log
done
use main-ext > /dev/null
for dt in bf16 fp32; do
  timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype $dt \
    --sizes 8K:1G:4 --timeout 145 --csv $OUT/family-$dt.csv > $OUT/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"
done
left=$((590 - SECONDS))
timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus 2 --tokens 1,32,256,4096,16384 --iters 20 --timeout $((left - 5)) \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe W=2: exit $? [$SECONDS s]"
