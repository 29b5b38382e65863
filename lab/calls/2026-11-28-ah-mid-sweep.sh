#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28; the last ~4 minutes of the session's device time): where the two targets
# still missed by a few percent might move by geometry alone, on main (wheel fg-ext = main's C++):
#   8 MB exact (1.05-1.11x symm_mem's two-shot against 1.1x): the two-shot at 6-12 MB with 256-thread CTAs, 132/264 CTAs,
#   2 groups (one tile a CTA at 8 MB today, so no pipeline);
#   int4 at 128 MB (2.72x NCCL on 4x H100, 2.89x on 4x H200, against 2.8x / 3.0x): groups 1-4 and 264/396 CTAs.
# Expectation: at most a few percent either way; anything over 3% becomes a rule. Carry .wheels/fg-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use fg-ext > /dev/null
DEV_SIZES=6,8,12 DEV_METHODS=nccl,two,two_t256,two_t512_b132,two_t512_b264,two_t256_b264,two_g2 \
  timeout 60 python3 lab/scripts/dev_timing.py > $OUT/dev-mid.log 2>&1
echo "dev_timing mid: exit $? [$SECONDS s]"; grep -E "^ *(bytes|[0-9])" $OUT/dev-mid.log
DEV_SIZES=128 DEV_METHODS=nccl,int4,int4_g1,int4_g3,int4_g4,int4_t512_b264,int4_t512_b396,int4_t256,fp8,fp8_g2,fp8_g4 \
  timeout 60 python3 lab/scripts/dev_timing.py > $OUT/dev-128.log 2>&1
echo "dev_timing 128M: exit $? [$SECONDS s]"; grep -E "^ *(bytes|[0-9])" $OUT/dev-128.log
