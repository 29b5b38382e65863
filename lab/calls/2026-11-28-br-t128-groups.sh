#!/usr/bin/env bash
# 2x H200. t128-ext (128-thread CTAs for the fp32 all-gather / all-to-all on 2 GPUs). Groups sweep at 128 threads:
# fp32 ag / a2a fp8 / int8 / int4 at 32 / 128 / 512 MB (call bq: ag fp8 / int8 128 MB 2-3% slower at 128 threads,
# where the input-bytes rule gives 1 group a CTA).
# Carry .wheels/t128-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use t128-ext > /dev/null
DEV_DTYPE=fp32 DEV_SIZES=32,128,512 DEV_KINDS=ag,a2a DEV_CODECS=fp8,int8,int4 DEV_THREADS=128 DEV_GROUPS=0,1,2,3,4,6,8,12,16 \
  timeout 150 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
echo "sweep: exit $? [$SECONDS s]"; sed "s/^/fp32 /" /tmp/dx.log > $OUT/sweep-t128.log
python3 lab/scripts/groups_table.py $OUT/sweep-t128.log 1 | grep -v nccl
