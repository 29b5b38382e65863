#!/usr/bin/env bash
# Ran 2026-11-28 as call ar on GPUs 0-1 of the 4x H200 of call aq (CUDA_VISIBLE_DEVICES=0,1): main with the exchange capped at 256 threads on 2 GPUs (wheel main-ext, built from
# main 2026-11-28): W = 2 twin checks, the reduce-scatter's CTA size (256 vs 512, not measured at W = 2 before the
# cap), then the family (bf16) republished for this machine. Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -4
DEV_SIZES=32,128,512 DEV_KINDS=rs DEV_CODECS=fp16,fp8,int4 DEV_THREADS=256,512 timeout 100 python3 lab/scripts/dev_exchange.py > $OUT/dev-exchange.log 2>&1
echo "dev_exchange: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange.log
timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 145 --csv $OUT/family-bf16.csv > $OUT/family-bf16.log 2>&1
echo "family bf16: exit $? [$SECONDS s]"
