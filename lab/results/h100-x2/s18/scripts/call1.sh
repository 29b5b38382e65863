#!/usr/bin/env bash
# Session-18 call 1 (2 GPUs), wheel `fused2` (6254a56: the two-shot with the epilogue inside, every
# codec; the one-shot's fused kernel at hidden 1024): the epilogue GPU tests on 2 GPUs, the fused
# scenarios at W = 4 and 8 on one shared GPU, compute-sanitizer over the epilogue, then the fused
# calls against the two-kernel path (QUICKREDUCE_FUSED_EPILOGUE=0) in the same call.
set -uo pipefail
DEVICE_LOG=call1.log source lab/scripts/device_lib.sh
SECONDS=0
use fused2
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
timeout 240 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/epilogue_tests.log 2>&1
echo "epilogue tests on 2 GPUs: exit $?: $(tail -1 $OUT/epilogue_tests.log) [$SECONDS s]"
grep -E "FAILED|Error|differ|route" $OUT/epilogue_tests.log | head -20
for w in 4 8; do
  QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$w QR_TEST_SCENARIOS=epilogue_fused_one_shot,epilogue_fused_two_shot QR_EPILOGUE_REPLAYS=50 \
    timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared_w$w.log 2>&1
  echo "fused scenarios W=$w shared: exit $?: $(tail -1 $OUT/shared_w$w.log) [$SECONDS s]"
  grep -E "FAILED|differ|route" $OUT/shared_w$w.log | head -10
done
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck racecheck synccheck" SANITIZE_TIMEOUT_S=90 \
  bash scripts/gpu_check.sh sanitize 2>&1 | grep -vE "^name|^NVIDIA" | tee -a $L
echo "[$SECONDS s]"
peers
E="--epilogue add_rmsnorm"
# One-shot, rows of one CTA: fused against two kernels.
qb $E --hidden 1024 --sizes 8K:256K:2 --methods qr_fused_lossless,trtllm_fused --csv $OUT/h1024.csv
QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden 1024 --sizes 8K:256K:2 --methods qr_fused_lossless --csv $OUT/h1024-2k.csv
echo "[$SECONDS s]"
# Two-shot, codecs: fused against two kernels, with the plain all-reduce beside.
S=512K:64M:4
for h in 4096 8192; do
  qb $E --hidden $h --sizes $S --methods qr_fused_int4,qr_fused_int4h,qr_fused_fp8 --csv $OUT/h$h.csv
  QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden $h --sizes $S --methods qr_fused_int4,qr_fused_int4h,qr_fused_fp8 --csv $OUT/h$h-2k.csv
done
qb --sizes $S --methods qr_int4,qr_int4h,qr_fp8 --csv $OUT/plain.csv
echo "[$SECONDS s]"
# Exact, above the one-shot: lossless 16M-64M, and FlashInfer's fused op beside.
qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless,trtllm_fused --csv $OUT/h4096-exact.csv
QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless --csv $OUT/h4096-exact-2k.csv
echo "[$SECONDS s]"
grep -E "qr_fused|trtllm_fused|qr_int4|qr_fp8" $L | grep -vE "┃" | tail -80
bash scripts/gpu_check.sh fold > /dev/null
