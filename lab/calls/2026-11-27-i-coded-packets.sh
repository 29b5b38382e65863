#!/usr/bin/env bash
# 4 GPUs: s23a (main + the exchange plan in shifts and 32-bit divisions, the dynamic plan one thread a
# destination, the scaled codecs' small path) against s22b (main before both; its exchange kernel is the
# same but for the plan). Expectations written before the run:
#  - dynamic and host-sized all-to-all at 8-512 KB: 1-3 us less each (the plan step took ~6.5-7.5k cycles
#    of CTA 0 for the host-sized call and ~10.5-11k for the dynamic one); dynamic / host <= 1.1;
#  - every codec at 8-512 KB: from 22-28 us to <= 1.5x the exact packets (<= ~8 us at 512 KB).
# Then the GPU tests of the new path and the dynamic all-to-all at W = 4.
# Carry .wheels/s22b-ext, .wheels/s23a-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
for v in s22b-ext s23a-ext s22b-ext s23a-ext; do
  use $v > /dev/null
  timeout 40 python3 -m quickreduce.cli bench moe --no-multicast --part a2a --a2a-sizes 8K,32K,128K,512K --csv /tmp/a2a.csv >> $L 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed 1d /tmp/a2a.csv | sed "s/^/$v,/" >> $OUT/a2a-ab.csv
done
peers
for v in s22b-ext s23a-ext; do
  use $v > /dev/null
  timeout 100 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --sizes 8K:8M:4 --timeout 95 --csv $OUT/family-small-$v.csv > /tmp/family.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
done
use s23a-ext > /dev/null
left=$((560 - SECONDS))
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=300 QR_TEST_SCENARIOS=coded_small_segments,collective_mismatch,collective_graph_replays,small_segments \
  timeout $((left > 60 ? left - 60 : 30)) python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-collectives.log 2>&1
echo "collective tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-collectives.log | tail -12
left=$((570 - SECONDS))
QR_TEST_WORLD_SIZE=4 QR_DYNAMIC_REPLAYS=200 timeout $((left > 20 ? left : 20)) python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-dynamic.log 2>&1
echo "dynamic tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-dynamic.log | tail -8
