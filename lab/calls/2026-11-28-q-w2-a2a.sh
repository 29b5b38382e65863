#!/usr/bin/env bash
# 2 GPUs (asked nvidia-h200-x2, 2026-11-28): issue 43's dynamic vs host-sized call with the current kernel
# (`bench moe --part a2a`); results/h200-x2/moe.csv's a2a part predates the start/plan barrier cut. Carry .wheels/main-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use main-ext > /dev/null
timeout 50 python3 -m quickreduce.cli bench moe --no-multicast --gpus 2 --part a2a --iters 20 --timeout 45 --csv $OUT/moe-a2a.csv > $OUT/a2a.log 2>&1
echo "a2a: exit $? [$SECONDS s]"; grep -vE "^\s*$" $OUT/a2a.log | tail -22
