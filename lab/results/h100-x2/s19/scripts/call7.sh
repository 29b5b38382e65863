#!/usr/bin/env bash
# Session 19 call 7 (2 GPUs): HEAD (wheel `head`: the lossless W = 2 any-size kernel at 2 CTAs an SM;
# the backend's collectives forwarded to the fallback's own bindings, Python) through every GPU test.
set -uo pipefail
DEVICE_LOG=call7.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use head
QR_TEST_HANG_DUMP_S=200 timeout 420 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1
echo "tests/gpu: exit $? $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"; grep -E "FAILED|Timeout|Error:" $OUT/gpu_tests.log | head -8
bash scripts/gpu_check.sh fold > /dev/null
