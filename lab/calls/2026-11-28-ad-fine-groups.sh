#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28): the scaled codecs' two-shot at W = 4 with a group per ~8 KB pushed to a
# peer (wheel fg) against 24 KB (fence-ext = main 47d22aa). From call ac's sweep (one run): int4 256 MB 4 groups 421
# vs auto 445 us, 1 GiB 16 groups 1459 vs 1517, fp8 256 MB 8-16 groups 665-670 vs 728; 64 MB 1 group best.
# Expectation: int4 / fp8 at 256 MB-1 GiB 3-8% faster, 64 MB unchanged, lossless and passthrough unchanged.
# Carry .wheels/fence-ext .wheels/fg-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use fg-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=codecs_vs_twin,graph_replays timeout 120 python3 -m pytest -q -s tests/gpu/test_dist.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -4
for v in fence fg fence fg; do
  use $v-ext > /dev/null
  DEV_SIZES=64,128,256,512,1024 DEV_METHODS=nccl,two,lossless,int8,fp8,int6,int4,fp4,int4h timeout 90 python3 lab/scripts/dev_timing.py > /tmp/dt.log 2>&1
  echo "dev_timing $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dt.log | tee -a $OUT/dev-timing.log | grep -E "^$v +[0-9b]"
done
