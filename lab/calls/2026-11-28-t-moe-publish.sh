#!/usr/bin/env bash
# 4 GPUs (asked nvidia-h100-x4, 2026-11-28): the whole `bench moe` at W = 4 and at W = 2 (GPUs 0,1 of the same host)
# with main b40b4d5 (per-rank CTA size of the all-to-all with split sizes), --iters 20 (call s ran --iters 10 and read
# one a2a point 2x off), for results/h100-x4/moe.csv and results/h100-x2/moe.csv; the a2a part once more at W = 4 as
# a check of its spread. Carry .wheels/pair-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use pair-ext > /dev/null
timeout 200 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096,16384 --iters 20 --timeout 195 \
  --csv $OUT/moe-w4.csv > $OUT/moe-w4.log 2>&1
echo "moe W=4: exit $? [$SECONDS s]"
CUDA_VISIBLE_DEVICES=0,1 timeout 200 python3 -m quickreduce.cli bench moe --no-multicast --gpus 2 --tokens 1,32,256,4096,16384 \
  --iters 20 --timeout 195 --csv $OUT/moe-w2.csv > $OUT/moe-w2.log 2>&1
echo "moe W=2: exit $? [$SECONDS s]"
timeout 60 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part a2a --iters 20 --timeout 55 --csv $OUT/a2a-w4-check.csv > $OUT/a2a-w4-check.log 2>&1
echo "a2a W=4 check: exit $? [$SECONDS s]"
for f in $OUT/moe-w4.log $OUT/moe-w2.log $OUT/a2a-w4-check.log; do echo "== $f"; grep -E "^a2a|uniform  (qr_graph |nccl)|16384.*(qr_graph |nccl)" $f; done
