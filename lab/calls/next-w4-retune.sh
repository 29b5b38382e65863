#!/usr/bin/env bash
# Ready for the next session, 4 GPUs (H100 or H200: the tune writes that card's table): retune with the
# exchange's per-peer groups (rs_ag's slice half changed; main since 2026-11-27), then the full bench with
# every peer under the new table and tests/gpu at 4 ranks with the time left. Build and pack the wheel
# first: WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh NAME && bash lab/scripts/engine_gpu_check.sh
# pack NAME; carry .wheels/NAME-ext and .peers; run as `WHEEL=NAME-ext bash lab/calls/next-w4-retune.sh`.
set -uo pipefail
DEVICE_LOG=w4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
peers
use "${WHEEL:?WHEEL=NAME-ext}"
timeout 100 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 95 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]" | tee -a $L
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 130 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 125 \
  --csv $OUT/bench-w4.csv > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/bench.log >> $L; tail -22 /tmp/bench.log
unset QUICKREDUCE_TUNE_FILE
left=$((580 - SECONDS))
QR_TEST_WORLD_SIZE=4 timeout $left python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/tests-gpu-w4.log 2>&1
echo "tests/gpu W=4: exit $? [$SECONDS s]" | tee -a $L; tail -3 $OUT/tests-gpu-w4.log
