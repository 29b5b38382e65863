#!/usr/bin/env bash
# 2 GPUs (asked as nvidia-h200-x2), s23d: the family with every peer at W = 2 (bf16, 8K:1G:4: the scaled
# codecs' small segments on the one-crossing path) and the coded path's tests at W = 2.
# Carry .wheels/s23d-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
peers
use s23d-ext > /dev/null
timeout 110 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 105 --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
QR_TEST_WORLD_SIZE=2 QR_COLLECTIVE_REPLAYS=300 QR_TEST_SCENARIOS=coded_small_segments,collective_mismatch,small_segments \
  timeout 70 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w2.log 2>&1
echo "collective tests W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w2.log | tail -5
