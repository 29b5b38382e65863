#!/usr/bin/env bash
# 2x H200. groups-ext = main + explicit exchange groups (the old rule at groups 0); rx2-ext = that + the W = 2
# groups rule for the reduce-scatter / all-gather (a group per ~32 KB of input a CTA reads, rs at least 2 from 4
# slices, groups of whole pairs under two slices a step) + the fp32 all-gather / all-to-all receiving two slices a
# step (pushes stay one). For bf16 and the fp32 reduce-scatter rx2 = the rule alone.
# Expectation (from call bl's sweep): fp32 rs 32-512 MB 4-20% faster (128 MB fp8 ~99 -> ~80 us), bf16 rs int4
# 128-256 MB 6-13%, ag 2-8%, a2a unchanged (the rule kept); rx2 alone: fp32 ag / a2a 0-10% faster, or slower (if
# the decode is not load-latency bound).
# Carry .wheels/groups-ext .wheels/rx2-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use rx2-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,coded_small_segments,collective_graph_replays,fp32_all_reduce \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-rx2.log 2>&1
echo "tests rx2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-rx2.log | tail -9
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized,dynamic_graph_replays timeout 60 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider >> $OUT/tests-rx2.log 2>&1
echo "tests rx2 dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-rx2.log | tail -3
for v in groups rx2 groups rx2; do
  use $v-ext > /dev/null
  for dt in bf16 fp32; do
    DEV_DTYPE=$dt DEV_SIZES=8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4 DEV_THREADS=0 \
      timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt $v: exit $? [$SECONDS s]"; sed "s/^/$dt $v /" /tmp/dx.log >> $OUT/ab.log
  done
done
python3 lab/scripts/ab_dev_exchange.py $OUT/ab.log 2 | grep -v " nccl "
for v in groups rx2; do
  use $v-ext > /dev/null
  DEV_DTYPE=fp32 DEV_SIZES=32,128,512 DEV_KINDS=ag,a2a DEV_CODECS=fp8,int4 DEV_THREADS=0 DEV_GROUPS=1,2,3,4,6,8,12,16 \
    timeout 100 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "fp32 groups sweep $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/sweep-rx2.log
done
python3 lab/scripts/groups_table.py $OUT/sweep-rx2.log 1 | grep -v nccl
