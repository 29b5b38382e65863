#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: e2e llama3-70b TP = 4 with the prefill captured in a CUDA graph (main; extension s22b-ext).
# Carry .wheels/s22b-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
peers
use s22b-ext
t0=$SECONDS
timeout 240 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 235 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$((SECONDS - t0)) s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log; grep -iE "error|fail|skipp|dropped" /tmp/e2e.log | head
