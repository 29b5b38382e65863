#!/usr/bin/env bash
# Session 20 call 3 (2 GPUs): issue 27's remaining checks at HEAD (wheel `head` = 6dbdffb): racecheck and
# synccheck over the epilogue part of sanitize_run.py (memcheck ran in call 1), epilogue_vs_oracle with
# every rank on GPU 0 at W = 4, and the epilogue bench rows end to end on one GPU (--shared-gpu).
set -uo pipefail
DEVICE_LOG=call3.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="racecheck synccheck" SANITIZE_TIMEOUT_S=110 bash scripts/gpu_check.sh sanitize 2>&1 | tee -a $L
echo "[$SECONDS s]"
QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=epilogue_vs_oracle,epilogue_fp8 \
  timeout 170 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/shared-w4.log 2>&1
echo "shared W=4 epilogue_vs_oracle: exit $? $(tail -1 $OUT/shared-w4.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/shared-w4.log | head -4
timeout 120 python3 -m quickreduce.cli bench --shared-gpu --epilogue add_rmsnorm --hidden 4096 --timeout 110 \
  --csv $OUT/epilogue-shared.csv > $OUT/epilogue-shared.log 2>&1
echo "shared-gpu epilogue bench: exit $? [$SECONDS s]"; tail -4 $OUT/epilogue-shared.log
bash scripts/gpu_check.sh fold > /dev/null
