#!/usr/bin/env bash
# 4 GPUs (asked nvidia-h100-x4, 2026-11-28): after landing the per-rank CTA size of the all-to-all with split sizes
# (wheel .wheels/pair-ext = main b40b4d5's C++): compute-sanitizer at W = 2 over the mixed-CTA and dynamic scenarios,
# W = 8 on one shared GPU, then the whole `bench moe` at W = 4 for results/h100-x4/moe.csv. Carry .wheels/pair-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use pair-ext > /dev/null
san() {  # tool gpus log scenarios
  CUDA_VISIBLE_DEVICES=$2 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=$4 QR_DYNAMIC_REPLAYS=20 \
    timeout 200 compute-sanitizer --tool $1 --target-processes all --report-api-errors no python3 -m pytest -q -s \
    tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $3 2>&1
  echo "$1 W=2: exit $? [$SECONDS s]"
}
san memcheck 0,1 $OUT/memcheck.log mixed_cta_all_to_all,dynamic_vs_host_sized,dynamic_bad_counts &
san racecheck 2,3 $OUT/racecheck.log mixed_cta_all_to_all,dynamic_graph_replays,dynamic_bad_counts & wait
grep -c "ERROR SUMMARY: 0 errors" $OUT/memcheck.log; grep -E "ERROR SUMMARY|Invalid|passed|failed" $OUT/memcheck.log | sort | uniq -c | head
grep -c "RACECHECK SUMMARY: 0 hazards" $OUT/racecheck.log; grep -E "RACECHECK SUMMARY|hazard|passed|failed" $OUT/racecheck.log | sort | uniq -c | head
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=50 QR_COLLECTIVE_REPLAYS=50 \
  QR_TEST_SCENARIOS=mixed_cta_all_to_all,uneven_all_to_all,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  timeout 170 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/w8.log 2>&1
echo "W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/w8.log | tail -8
timeout 150 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096,16384 --iters 10 --timeout 145 \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; grep -vE "^\s*$" $OUT/moe.log | tail -70
