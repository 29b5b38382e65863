#!/usr/bin/env bash
# 2026-11-27, 4 GPUs, main with the exchange's groups counted per peer (its extension: s22b-ext, the same C++
# but a comment): the family at W = 4 with every method (bf16, 8K-1G by 4x), e2e llama3-70b TP = 4 (a
# provider's first point now warmed longer), the MoE layer at 4096 tokens (both models, every skew).
# Carry .wheels/s22b-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
peers
use s22b-ext
t0=$SECONDS
timeout 200 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 195 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$((SECONDS - t0)) s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
t0=$SECONDS
timeout 200 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 195 --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$((SECONDS - t0)) s]"; cat /tmp/family.log >> $L
t0=$SECONDS
timeout 150 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part layer --tokens 4096 --iters 10 --timeout 145 \
  --csv $OUT/moe-4096.csv > /tmp/moe.log 2>&1
echo "moe 4096: exit $? [$((SECONDS - t0)) s]"; cat /tmp/moe.log >> $L; tail -25 /tmp/moe.log
ls $OUT
