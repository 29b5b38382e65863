#!/usr/bin/env bash
# 4x H100 (2026-11-28): the all-to-all at 512 threads with 256-wide slices for small calls (wheel a2aw: main + the
# kernel's slice-width rule; the even all-to-all at 512 threads from 4.3 MB segments). Expectation (call k's A/B):
# every size of `bench moe --part a2a` at main's time or better, >= 32 MB a rank 5-13% faster; the even family
# all-to-all 3-6% faster from 32 MB, unchanged below. Sanitizers (W = 2, GPUs 0,1 and 2,3 in parallel) and the W = 4
# tests first. Carry .wheels/main-ext, .wheels/a2aw-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use a2aw-ext > /dev/null
san() {  # tool gpus log tests
  CUDA_VISIBLE_DEVICES=$2 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=$4 QR_DYNAMIC_REPLAYS=20 \
    timeout 150 compute-sanitizer --tool $1 --target-processes all --report-api-errors no python3 -m pytest -q -s \
    tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $3 2>&1
  echo "$1 dynamic W=2: exit $? [$SECONDS s] $(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' $3) clean"
}
san memcheck 0,1 $OUT/memcheck.log dynamic_vs_host_sized,dynamic_bad_counts & san racecheck 2,3 $OUT/racecheck.log dynamic_graph_replays,dynamic_bad_counts & wait
grep -m8 -E "SUMMARY|Invalid|passed|failed|checks" $OUT/memcheck.log $OUT/racecheck.log
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=200 QR_DYNAMIC_REPLAYS=300 timeout 130 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -16
moe_ab a2a $OUT/a2a-ab.csv 45 main a2aw --iters 20
ab_a2a $OUT/a2a-ab.csv main a2aw
for v in main a2aw main a2aw; do
  use $v-ext > /dev/null
  timeout 50 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective all_to_all --dtype bf16 \
    --methods nccl,qr_passthrough,qr_fp8,qr_int4 --sizes 2M:512M:4 --replays 9 --timeout 45 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv; cat /tmp/fam.log >> $L
done
ab_family $OUT/family-ab.csv main a2aw
