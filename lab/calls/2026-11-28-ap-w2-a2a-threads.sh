#!/usr/bin/env bash
# 2026-11-28 call ap (2 GPUs; nvidia-h200-x2): the even all-to-all's CTA size at W = 2. Its exact 128 MB read 239.5 us
# on 2026-11-28 (512 threads, the RS / AG rule since e998e2a) against 211.8 on 2026-11-27 (256 threads) while
# nccl_symm moved 207.8 -> 219.8: is 512 slower at W = 2? (At W = 4, 4x H200, 512 was 0-7% faster.) Wheel main-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
for run in 1 2; do
  DEV_SIZES=8,32,128,512 DEV_KINDS=a2a,ag DEV_CODECS=fp16,fp8,int4 DEV_THREADS=256,512 timeout 120 python3 lab/scripts/dev_exchange.py \
    > $OUT/dev-exchange-$run.log 2>&1
  echo "dev_exchange $run: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange-$run.log
done
