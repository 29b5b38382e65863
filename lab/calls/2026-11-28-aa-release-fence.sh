#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28): one system fence per announce instead of one per peer's flag.
# Why: st.release.sys compiles to MEMBAR.ALL.SYS + a strong store, so the two-shot's announce (and the
# exchange's, and its end-of-call done words) at W = 4 ran three fences in a row, each waiting for the
# previous peer's flag to be acknowledged over NVLink. The W = 4 two-shot's fixed cost is ~17 us (8 KB) against
# 8.5 at W = 2. Expectation: two-shot 8 KB-1 MB 2-5 us less at W = 4, 16 MB 2-5 us less; the family's slice
# path (codecs at 8-512 KB, exact from 8 MB) 1-3 us less; large sizes unchanged.
# Wheels: main-ext (main 7e8f371's C++), relfence-ext (the change), timers-ext (main + QR_PHASE_TIMERS).
# Carry .wheels/main-ext .wheels/relfence-ext .wheels/timers-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use relfence-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=passthrough_reference,codecs_vs_twin,graph_replays timeout 150 python3 -m pytest -q -s \
  tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-dist.log 2>&1
echo "tests dist W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-dist.log | tail -6
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,collective_graph_replays,uneven_all_to_all,dynamic_vs_host_sized QR_COLLECTIVE_REPLAYS=100 \
  QR_DYNAMIC_REPLAYS=50 timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-coll.log 2>&1
echo "tests collectives W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-coll.log | tail -6
use timers-ext > /dev/null
PT_SIZES=2,16 PT_CODECS=fp16,int4 timeout 60 python3 lab/scripts/phase_timers.py > $OUT/timers.log 2>&1
echo "timers: exit $? [$SECONDS s]"; awk '/^---/{p=/call 2/; if(p) print} p&&/rank 0/' $OUT/timers.log
for v in main relfence main relfence; do
  use $v-ext > /dev/null
  DEV_SIZES=8K,256K,1,4,16,32,64 DEV_METHODS=two,int4,lossless timeout 60 python3 lab/scripts/dev_timing.py > /tmp/dt.log 2>&1
  echo "dev_timing $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dt.log | tee -a $OUT/dev-timing.log | grep -E "^$v +[0-9b]"
done
for v in main relfence main relfence; do
  use $v-ext > /dev/null
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_fp8,qr_int4 --sizes 8K:32M:4 --replays 9 --timeout 55 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv main relfence
