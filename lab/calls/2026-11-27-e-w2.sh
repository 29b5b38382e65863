#!/usr/bin/env bash
# 2026-11-27, 2 GPUs (asked as nvidia-h200-x2; H100s may come): e2e llama3-70b TP = 2 (4 layers, every
# provider); on H200 also the add + RMSNorm epilogue against FlashInfer's fused op (trtllm_fused) at decode
# sizes, hidden 4096 and 8192. Carry .wheels/s22b-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
peers
use s22b-ext
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
t0=$SECONDS
timeout 150 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 2 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 145 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$((SECONDS - t0)) s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
case "$gpu" in
  *H200*)
    for hidden in 4096 8192; do
      t0=$SECONDS
      timeout 120 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --epilogue add_rmsnorm --hidden $hidden --sizes 8K:4M:2 \
        --timeout 115 --csv $OUT/epilogue-h$hidden.csv > /tmp/ep.log 2>&1
      echo "epilogue h$hidden: exit $? [$((SECONDS - t0)) s]"; cat /tmp/ep.log >> $L; grep -E "trtllm_fused|qr_fused_passthrough|qr_fused_lossless" /tmp/ep.log | head -30
    done ;;
esac
ls $OUT
