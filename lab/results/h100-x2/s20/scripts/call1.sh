#!/usr/bin/env bash
# Session 20 call 1 (2 GPUs): HEAD (wheel `head` = 6dbdffb) through every GPU test, then the epilogue
# scenarios with every rank on GPU 0 at W = 4 and 8, then memcheck over the epilogue part: the checks
# session 19's last host-side changes (the residual route in the call signature, the norm-only null
# `sum`, the epilogue scenarios running both routes, `_route`) never had on a GPU.
set -uo pipefail
DEVICE_LOG=call1.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
QR_TEST_HANG_DUMP_S=200 timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1
echo "tests/gpu: exit $? $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"; grep -E "FAILED|Timeout|Error:" $OUT/gpu_tests.log | head -8
for W in 4 8; do
  QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$W QR_TEST_SCENARIOS=epilogue_in_place_and_graphs,epilogue_fused_one_shot \
    timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared-w$W.log 2>&1
  echo "shared W=$W epilogue: exit $? $(tail -1 $OUT/shared-w$W.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/shared-w$W.log | head -4
done
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS=memcheck SANITIZE_TIMEOUT_S=120 bash scripts/gpu_check.sh sanitize 2>&1 | tee -a $L
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
