#!/usr/bin/env bash
# 2 of a 4x H200 host, wheel main: issue 39's runs on H200 at W = 2 (never done): the family with every peer
# (bf16 and fp32), e2e TP = 2 for llama3-8b and llama3-70b. Carry .wheels/main-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
peers
use main-ext > /dev/null
for dt in bf16 fp32; do
  timeout 110 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype $dt \
    --sizes 8K:1G:4 --timeout 105 --csv $OUT/family-$dt.csv > /tmp/family.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
done
for m in 8b 70b; do
  timeout 85 python3 -m quickreduce.cli e2e --no-multicast --model llama3-$m --layers 4 --gpus 2 --prefill 1024,4096,8192 --batches 1,16,64,256 \
    --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
    --timeout 80 --csv $OUT/e2e-llama3-$m-L4.csv --no-plot > /tmp/e2e.log 2>&1
  echo "e2e $m: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A6 "time_ms ('\*'" /tmp/e2e.log
done
