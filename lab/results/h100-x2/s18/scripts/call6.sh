#!/usr/bin/env bash
# Session-18 call 6 (2 GPUs): what 2 CTAs an SM cost the plain two-shot (the fused forms of this
# session needed 64 registers, so 2 an SM): main18c (3-4 an SM) / cta2 (every two-shot kernel at
# 2 an SM) / main18c, int4, int4h and the exact lossless at 4M-64M.
set -uo pipefail
DEVICE_LOG=call6.log source lab/scripts/device_lib.sh
SECONDS=0
for v in main18c cta2 main18c; do
  use $v
  qb --sizes 4M:64M:2 --methods qr_int4,qr_int4h,qr_lossless --csv $OUT/$v-$SECONDS.csv
done
echo "[$SECONDS s]"
grep -E "variant|qr_int4|qr_lossless" $L | grep -vE "┃" | tail -50
bash scripts/gpu_check.sh fold > /dev/null
