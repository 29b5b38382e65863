#!/usr/bin/env bash
# 2026-11-28 call ak (4 GPUs; nvidia-h100-x4): where the coded packet path (fp8 ... int4 on the flag-in-data channel,
# carrying the round-tripped values at 16 bits, reduce-scatter at 32) stops paying. Call aj (4x H200) at 8 MB: its
# all-gather / all-to-all 28-37 us against 18-27 on the slice path with the codec. Columns: t0 = the rule (packets
# where the segment fits), t-1 = the rule's CTA size on the slice path. Wheel main-ext. Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
for run in 1 2; do
  DEV_SIZES=128K,512K,1,2,4,8 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int6 DEV_THREADS=0,-1 timeout 150 python3 lab/scripts/dev_exchange.py \
    > $OUT/dev-exchange-$run.log 2>&1
  echo "dev_exchange $run: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange-$run.log
done
