#!/usr/bin/env bash
# 2026-11-28 call aj (4 GPUs; nvidia-h100-x4): main after the 8-bit exchange groups (wheel main-ext, built from main).
#  1. W = 4 twin checks of the family on this wheel.
#  2. The exchange's CTA size at 8-128 MB (lab/scripts/dev_exchange.py; 0 = the rule: 512 threads for RS / AG from
#     264 tiles, 256 for the even all-to-all). Expectation: none, a sweep to find whether the exact family's 32 MB gap
#     (0.90-0.97x the best peer) is a matter of CTA size.
#  3. Republish the family (every peer) and `bench moe` at W = 4 for this machine.
# Carry .wheels/main-ext .peers
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
peers
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -3
DEV_SIZES=8,32,128 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4 DEV_THREADS=0,128,256,512 timeout 150 python3 lab/scripts/dev_exchange.py \
  > $OUT/dev-exchange.log 2>&1
echo "dev_exchange: exit $? [$SECONDS s]"; cat $OUT/dev-exchange.log | grep -E "^(kind|rs|ag|a2a) "
timeout 240 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 235 --csv $OUT/family-bf16.csv > $OUT/family.log 2>&1
echo "family: exit $? [$SECONDS s]"
left=$((590 - SECONDS))
timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --tokens 1,32,256,4096,16384 --iters 20 --timeout $((left - 5)) \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"
grep -E "uniform  (qr_graph |nccl)|16384.*(qr_graph |nccl)" $OUT/moe.log
