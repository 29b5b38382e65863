#!/usr/bin/env bash
# Ready, NEVER GPU-RUN (2 or 4 GPUs): the dynamic all-to-all's packet path (lab/wip/dynamic-packets.patch: max_rows,
# exchange/dynamic_packets.cuh; wheel .wheels/packets-ext built 2026-11-28 from main + the patch). Apply the patch
# first (the Python API and the tests are in it; main-ext's binding lacks max_rows, so only packets-ext runs):
#   git apply lab/wip/dynamic-packets.patch
# Expectation (lab/NOTES.md session 26): the bounded call at 8 KB-2 MB a rank ~4-7 us on 4x H100 (the slice path
# ~25 us, the even packet all-to-all ~4-6 us) and ~3-5 us on 2x H100 (slice path ~15 us); outputs bitwise equal to the
# host-sized call. Tests first: every dynamic scenario (the packet path's own: dynamic_packets; bad counts with
# max_rows), then `bench moe --part a2a` (its dynamic_packets_us column) and the layer at 1-32 tokens (qr_bounded:
# max_rows = tokens * k), then compute-sanitizer at W = 2 and W = 8 on one shared GPU. Carry .wheels/packets-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use packets-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_DYNAMIC_REPLAYS=400 QR_TEST_SCENARIOS=dynamic_packets,dynamic_bad_counts,dynamic_vs_host_sized,dynamic_graph_replays \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL|Error" $OUT/tests.log | tail -20
grep -q " passed" $OUT/tests.log && ! grep -qE "[1-9][0-9]* failed" $OUT/tests.log || { echo "tests failed: stop"; exit 1; }
timeout 60 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part a2a --a2a-sizes 8K,32K,128K,512K,2M \
  --iters 20 --timeout 55 --csv $OUT/a2a.csv > $OUT/a2a.log 2>&1
echo "a2a: exit $? [$SECONDS s]"; grep -E "^a2a" $OUT/a2a.log
timeout 90 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part layer --tokens 1,8,32 \
  --methods qr_graph,qr_bounded,nccl --iters 20 --timeout 85 --csv $OUT/layer.csv > $OUT/layer.log 2>&1
echo "layer: exit $? [$SECONDS s]"; grep -E "qr_graph |qr_bounded|nccl" $OUT/layer.log | head -40
san() {  # tool gpus log scenarios
  CUDA_VISIBLE_DEVICES=$2 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=$4 QR_DYNAMIC_REPLAYS=20 \
    timeout 200 compute-sanitizer --tool $1 --target-processes all --report-api-errors no python3 -m pytest -q -s \
    tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $3 2>&1
  echo "$1 W=2: exit $? [$SECONDS s]"
}
if [ "$gpus" -ge 4 ]; then
  san memcheck 0,1 $OUT/memcheck.log dynamic_packets,dynamic_bad_counts & san racecheck 2,3 $OUT/racecheck.log dynamic_bad_counts & wait
else
  san memcheck 0,1 $OUT/memcheck.log dynamic_bad_counts
fi
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/memcheck.log $OUT/racecheck.log 2>/dev/null | sort | uniq -c
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=40 QR_TEST_SCENARIOS=dynamic_packets,dynamic_bad_counts \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/w8.log 2>&1
echo "W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/w8.log | tail -6
