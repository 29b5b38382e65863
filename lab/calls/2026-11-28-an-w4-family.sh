#!/usr/bin/env bash
# 2026-11-28 call an (4 GPUs; nvidia-h100-x4): main with the coded packet path up to 2 MiB in from all peers (W = 2: the
# whole channel, as before call al's wheel; W = 4: 682 KiB a peer). Tests, the reach check (t0 = rule, t-1 = slices),
# then the family (bf16) republished for this machine. Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -4
DEV_SIZES=1,2,4,8 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp8,int4 DEV_THREADS=0,-1 timeout 100 python3 lab/scripts/dev_exchange.py > $OUT/dev-exchange.log 2>&1
echo "dev_exchange: exit $? [$SECONDS s]"; grep -E "^(kind|rs|ag|a2a) " $OUT/dev-exchange.log
for dt in bf16; do
  timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype $dt \
    --sizes 8K:1G:4 --timeout 145 --csv $OUT/family-$dt.csv > $OUT/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"
done
