#!/usr/bin/env bash
# 4x H100 (2026-11-28): issue 43 with the current exchange at W = 4. GPU tests (collectives, dynamic all-to-all with
# 1000 graph replays), memcheck (GPUs 0,1) and racecheck (GPUs 2,3) in parallel over the dynamic tests at W = 2
# (not run since the warp-1 count read), the 256- vs 512-thread all-to-all A B A B (`bench moe --part a2a`),
# the skew probe. Carry .wheels/main-ext and .wheels/a2a512-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use main-ext > /dev/null
san() {  # tool gpus log
  CUDA_VISIBLE_DEVICES=$2 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=dynamic_bad_counts,dynamic_graph_replays QR_DYNAMIC_REPLAYS=20 \
    timeout 150 compute-sanitizer --tool $1 --target-processes all --report-api-errors no python3 -m pytest -q -s \
    tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $3 2>&1
  echo "$1 dynamic W=2: exit $? [$SECONDS s]"
}
san memcheck 0,1 $OUT/memcheck.log & san racecheck 2,3 $OUT/racecheck.log & wait
grep -c "ERROR SUMMARY: 0 errors" $OUT/memcheck.log; grep -m6 -E "ERROR SUMMARY|Invalid|passed|failed" $OUT/memcheck.log
grep -c "RACECHECK SUMMARY: 0 hazards" $OUT/racecheck.log; grep -m6 -E "RACECHECK SUMMARY|hazard|passed|failed" $OUT/racecheck.log
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=200 QR_DYNAMIC_REPLAYS=1000 timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -16
moe_ab a2a $OUT/a2a-ab.csv 45 main a2a512 --iters 20
ab_a2a $OUT/a2a-ab.csv main a2a512
use main-ext > /dev/null
timeout $((585 - SECONDS)) python3 lab/probes/a2a_skew.py 2048,8192,32768 > $OUT/a2a-skew.txt 2>&1
echo "a2a skew: exit $? [$SECONDS s]"; grep -v Warning $OUT/a2a-skew.txt | tail -13
