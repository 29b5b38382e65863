#!/usr/bin/env bash
# Session-18 call 2 (2 GPUs): the fused two-shot reworked (epilogue after the pipeline, two lanes a
# thread in flight): fusedA (2 CTAs an SM, 64 registers, 0-24 bytes of stack) against fusedB (3 an SM,
# one lane a thread, 16-48 bytes of stack) and the two-kernel path, same machine; fusedA's epilogue
# tests on 2 GPUs and the fused two-shot scenario at W = 8 on one shared GPU.
set -uo pipefail
DEVICE_LOG=call2.log source lab/scripts/device_lib.sh
SECONDS=0
use fusedA
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/epilogue_tests.log 2>&1
echo "epilogue tests on 2 GPUs: exit $?: $(tail -1 $OUT/epilogue_tests.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/epilogue_tests.log | head -20
QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=epilogue_fused_two_shot,epilogue_vs_oracle QR_EPILOGUE_REPLAYS=50 \
  timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared_w8.log 2>&1
echo "W=8 shared: exit $?: $(tail -1 $OUT/shared_w8.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/shared_w8.log | head -10
E="--epilogue add_rmsnorm"
S=512K:32M:4
run() {  # variant, fused|2k, tag
  use $1
  if [ "$2" = 2k ]; then export QUICKREDUCE_FUSED_EPILOGUE=0; else unset QUICKREDUCE_FUSED_EPILOGUE; fi
  qb $E --hidden 4096 --sizes $S --methods qr_fused_int4,qr_fused_int4h --csv $OUT/$3-h4096.csv
  qb $E --hidden 8192 --sizes $S --methods qr_fused_int4 --csv $OUT/$3-h8192.csv
  qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless --csv $OUT/$3-exact.csv
  unset QUICKREDUCE_FUSED_EPILOGUE
}
run fusedA fused A1
run fusedB fused B1
run fusedA 2k K1
run fusedA fused A2
use fusedA
qb --sizes $S --methods qr_int4,qr_int4h --csv $OUT/plain.csv
echo "[$SECONDS s]"
grep -E "variant|qr_fused|qr_int4" $L | grep -vE "┃" | tail -120
bash scripts/gpu_check.sh fold > /dev/null
