#!/usr/bin/env bash
# Session-18 call 5 (2 GPUs): the two-shot with the epilogue in its gather (`ownerp`, owners send
# each 256-value warp's sum of squares with the sum): epilogue tests on 2 GPUs and at W = 8 on one
# shared GPU, memcheck over the epilogue, then fused against the two kernels, same machine.
set -uo pipefail
DEVICE_LOG=call5.log source lab/scripts/device_lib.sh
SECONDS=0
use ownerp
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/epilogue_tests.log 2>&1
echo "epilogue tests on 2 GPUs: exit $?: $(tail -1 $OUT/epilogue_tests.log) [$SECONDS s]"
grep -E "FAILED|checks|differ|route|crash" $OUT/epilogue_tests.log | head -20
QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=epilogue_fused_two_shot QR_EPILOGUE_REPLAYS=50 \
  timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared_w8.log 2>&1
echo "W=8 shared: exit $?: $(tail -1 $OUT/shared_w8.log) [$SECONDS s]"
grep -E "FAILED|checks|differ|route" $OUT/shared_w8.log | head -10
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck" SANITIZE_TIMEOUT_S=70 \
  bash scripts/gpu_check.sh sanitize 2>&1 | grep -vE "^name|^NVIDIA" | tee -a $L
echo "[$SECONDS s]"
E="--epilogue add_rmsnorm"
S=4M:64M:2
for f in 1 0; do
  export QUICKREDUCE_FUSED_EPILOGUE=$f
  qb $E --hidden 4096 --sizes $S --methods qr_fused_int4,qr_fused_int4h,qr_fused_fp8 --csv $OUT/h4096-f$f.csv
  qb $E --hidden 1024 --sizes 256K:2M:2 --methods qr_fused_int4 --csv $OUT/h1024-f$f.csv
  qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless --csv $OUT/exact-f$f.csv
done
unset QUICKREDUCE_FUSED_EPILOGUE
qb --sizes $S --methods qr_int4 --csv $OUT/plain.csv
echo "[$SECONDS s]"
grep -E "qr_fused|qr_int4" $L | grep -vE "┃" | tail -70
bash scripts/gpu_check.sh fold > /dev/null
