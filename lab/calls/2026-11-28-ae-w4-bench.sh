#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28): the all-reduce bench with every peer after the scaled codecs' finer
# groups (main at the fine-groups commit; wheel fg-ext), built-in h100-w4 table (tuned earlier the same day), then
# e2e llama3-70b TP = 4 with the time left. Carry .wheels/fg-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
peers
use fg-ext > /dev/null
timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 145 \
  --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L
timeout 120 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 115 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
