#!/usr/bin/env bash
# Session-18 call 4 (2 GPUs): the tree to land (`final18`: main with the data-warps exchange in the
# fused one-shot): compute-sanitizer over the epilogue, the fused one-shot scenario at W = 8 on one
# shared GPU, then every GPU test on 2 GPUs with a longer limit (call 3's run printed nothing in
# 300 s on a fresh machine: the backend tests compile with torch.compile, one thread a rank).
set -uo pipefail
DEVICE_LOG=call4.log source lab/scripts/device_lib.sh
SECONDS=0
use final18
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck racecheck synccheck" SANITIZE_TIMEOUT_S=90 \
  bash scripts/gpu_check.sh sanitize 2>&1 | grep -vE "^name|^NVIDIA" | tee -a $L
echo "[$SECONDS s]"
QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=epilogue_fused_one_shot QR_EPILOGUE_REPLAYS=50 \
  timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared_w8.log 2>&1
echo "W=8 shared fused one-shot: exit $?: $(tail -1 $OUT/shared_w8.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/shared_w8.log | head
timeout 400 python3 -m pytest -q -s -p no:cacheprovider tests/gpu --durations=8 > $OUT/gpu_tests.log 2>&1
echo "tests/gpu on 2 GPUs: exit $?: $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"
grep -E "FAILED|failed|checks|passed|s call|s setup" $OUT/gpu_tests.log | grep -v " 0 failed" | head -30
bash scripts/gpu_check.sh fold > /dev/null
