#!/usr/bin/env bash
# Ran 2026-11-28 as call aq (4 GPUs; nvidia-h100-x4): main after the coded packet ingress rule and the exchange CTA rules
# (wheel main-ext, built from main 2026-11-28): W = 4 twin checks of the family, the packet reach check, then the
# family republished for this machine (results/<machine>/family-bf16.csv; docs prose by hand). Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -4
DEV_SIZES=1,2,4,8 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp8,int4 DEV_THREADS=0,-1 timeout 100 python3 lab/scripts/dev_exchange.py > $OUT/dev-exchange.log 2>&1
echo "dev_exchange: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange.log
timeout 200 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 195 --csv $OUT/family-bf16.csv > $OUT/family-bf16.log 2>&1
echo "family bf16: exit $? [$SECONDS s]"
