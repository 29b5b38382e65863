#!/usr/bin/env bash
# 4x H100 (2026-11-28): the whole `bench moe` at W = 4 with main's exchange (per-segment CTA shares, the start/plan
# barrier cut): the layer at 1-16384 tokens a rank (DeepSeek-V3-like and Mixtral-like, uniform/mild/heavy router),
# the dynamic vs host-sized call, for results/h100-x4/moe.csv. Carry .wheels/main-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use main-ext > /dev/null
timeout 585 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096,16384 --iters 10 --timeout 580 \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; grep -vE "^\s*$" $OUT/moe.log | tail -60
