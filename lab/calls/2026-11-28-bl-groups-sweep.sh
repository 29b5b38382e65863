#!/usr/bin/env bash
# 2x H200. Wheel groups-ext = main + explicit pipeline groups for the exchange (ExchangeArgs.groups, 0 = the rule).
# 1. Tests (the kernel's args changed): large segments, twin, uneven, mixed CTA.
# 2. Groups sweep (dev_exchange DEV_GROUPS) fp32 and bf16, rs / ag / a2a, fp8 / int4, 32-512 MB.
#    Expectation: fp32 rs fp8 128 MB (98.5 us in the family, 0.77 us/MB against 0.52 at 512 MB; the rule gives it
#    3 groups) 5-10% faster at 1-2 groups if the handshakes cost; elsewhere the rule within 3% of the best.
# 3. Laps (timers-ext: main before this change, QR_PHASE_TIMERS=1) of fp32 rs / ag fp8 at 128 / 512 MB.
# Carry .wheels/groups-ext .wheels/timers-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use groups-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-groups.log 2>&1
echo "tests groups: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-groups.log | tail -6
for dt in fp32 bf16; do
  DEV_DTYPE=$dt DEV_SIZES=32,64,128,256,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp8,int4 DEV_THREADS=0 DEV_GROUPS=0,1,2,3,4,6,8,12,16 \
    timeout 200 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "groups sweep $dt: exit $? [$SECONDS s]"; sed "s/^/$dt /" /tmp/dx.log >> $OUT/groups-sweep.log
done
python3 lab/scripts/groups_table.py $OUT/groups-sweep.log 1
use timers-ext > /dev/null
EL_DTYPE=fp32 EL_BYTES=128M,512M EL_KINDS=reduce_scatter,all_gather EL_CODECS=fp8 timeout 100 python3 lab/scripts/exchange_laps.py \
  > $OUT/laps-fp32.log 2>&1
echo "laps fp32: exit $? [$SECONDS s]"; grep -A$((2 * gpus)) -E "^--- .* call 2" $OUT/laps-fp32.log | grep -E "^---|rank 0 " | cut -c1-400
