#!/usr/bin/env bash
# 2x H200. t128-ext = main's C++ (24c9827); the tree's Python: fp32 auto:<codec> takes the table's choice on the packet
# path too (it kept the exact call at <= 2 MB: reduce-scatter auto:int4 2 MB 8.1 us against int8 5.1). The fp32
# family with the tree's h200-w2 table (bf16 from call bo's tune, fp32 from call bs's) -> results/h200-x2/family-fp32.csv.
# Expectation: auto:int4 within 3% of the fastest codec at every fp32 size; the rest as call bs.
# Carry .wheels/t128-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use t128-ext > /dev/null
export QUICKREDUCE_TUNE_FILE=$PWD/python/quickreduce/tuned/h200-w2.json
timeout 120 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
  --dtype fp32 --sizes 8K:1G:4 --timeout 115 --csv $OUT/family-fp32.csv > /tmp/family-fp32.log 2>&1
echo "family fp32: exit $? [$SECONDS s]"; cat /tmp/family-fp32.log >> $L
