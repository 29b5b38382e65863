#!/usr/bin/env bash
# Ready (2 GPUs, ask nvidia-h200-x2; on 2026-11-28 it stopped at once: the card was an H100): the whole `bench moe` (--iters 20, a2a in turns) for
# results/h200-x2/moe.csv, whose tables predate the dynamic call's barrier cut; stops at once on another card
# (calls u-w asked this kind and ran on 2x H100). Carry .wheels/main-ext (main b40b4d5's C++, built as pair-ext).
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
case "$gpu" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
use main-ext > /dev/null
timeout 120 python3 -m quickreduce.cli bench moe --no-multicast --gpus 2 --tokens 1,32,256,4096,16384 --iters 20 --timeout 115 \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe W=2: exit $? [$SECONDS s]"; grep -E "^a2a|16384.*(qr_graph |nccl)" $OUT/moe.log
