#!/usr/bin/env bash
# 2026-11-27, 4 GPUs, right after w4-ab on the same machine: the collective family at W = 4 with nccl_symm
# under the table tune wrote there, then the chosen variant through tests/gpu at 4 ranks.
set -uo pipefail
cd .snap  # left by w4-ab on this machine, with chosen and tuned-w4.json
DEVICE_LOG=w4b.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
peers
VARIANT=$(cat chosen 2>/dev/null || echo head)
use $VARIANT
[ -f tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$PWD/tuned-w4.json
timeout 200 python3 -m quickreduce.cli bench --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 195 --csv $OUT/family-w4-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/family.log >> $L; tail -30 /tmp/family.log
QR_TEST_WORLD_SIZE=4 QR_TEST_HANG_DUMP_S=150 timeout 170 python3 -m pytest -q -x -p no:cacheprovider tests/gpu > $OUT/gpu_tests_w4.log 2>&1
echo "tests/gpu W=4 ($VARIANT): exit $? $(tail -1 $OUT/gpu_tests_w4.log) [$SECONDS s]" | tee -a $L
grep -E "FAILED|Error" $OUT/gpu_tests_w4.log | head -10
