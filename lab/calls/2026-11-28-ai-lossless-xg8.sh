#!/usr/bin/env bash
# Ran 2026-11-28 as call ai (4 GPUs; nvidia-h100-x4): two prepared changes against main, A B C A B C, with the tests each needs.
#  ll2 = main + lab/wip/lossless-w4-two-per-sm.patch: the lossless two-shot at W = 4 at 2 CTAs an SM (at 3 it takes 40
#        registers and 64 bytes of stack; W = 2's any-size lossless kernel gained 7-14% at 2 an SM). It is `auto`'s exact
#        path from 23.7 MB at W = 4. Expectation: lossless 32 MB-1 GiB 2-6% faster, or slower from fewer warps.
#  xg8 = main + lab/wip/exchange-8bit-groups.patch: fp8 / int8 family calls cut twice the pipeline groups (2026-11-28
#        call ac: fp8 5-15% faster at 128-512 MB with 2x the groups). Expectation: fp8/int8 RS/AG/A2A 128-512 MB 3-10%
#        faster; every other codec unchanged (same rule).
# Wheels (built 2026-11-28 from main 3b8663e+): main-ext, ll2-ext, xg8-ext. Carry .wheels/main-ext .wheels/ll2-ext .wheels/xg8-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use ll2-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=passthrough_reference,codecs_vs_twin timeout 100 python3 -m pytest -q -s tests/gpu/test_dist.py \
  -p no:cacheprovider > $OUT/tests-ll2.log 2>&1
echo "tests ll2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-ll2.log | tail -3
use xg8-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests-xg8.log 2>&1
echo "tests xg8: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-xg8.log | tail -3
for v in main ll2 main ll2; do
  use $v-ext > /dev/null
  DEV_SIZES=32,64,256,1024 DEV_METHODS=nccl,two,lossless timeout 60 python3 lab/scripts/dev_timing.py > /tmp/dt.log 2>&1
  echo "dev_timing $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dt.log | tee -a $OUT/dev-timing.log | grep -E "^$v +[0-9b]"
done
for v in main xg8 main xg8; do
  use $v-ext > /dev/null
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_fp8,qr_int8,qr_int4 --sizes 32M:512M:4 --replays 9 --timeout 55 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv main xg8
