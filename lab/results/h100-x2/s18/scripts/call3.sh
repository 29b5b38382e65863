#!/usr/bin/env bash
# Session-18 call 3 (2 GPUs): the landed tree (`main18`, 5f94c95: the fused two-shot taken out, the
# fused one-shot at hidden 1024): every GPU test on 2 GPUs; then session 17's data-warps exchange
# (`dwarps`: the fused one-shot's row sums sent by thread 0 after a 128-thread barrier, the control
# warp leaving first) against main18, main18 / dwarps / main18, with the plain one-shot beside.
set -uo pipefail
DEVICE_LOG=call3.log source lab/scripts/device_lib.sh
SECONDS=0
use main18
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1
echo "tests/gpu on 2 GPUs: exit $?: $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"
grep -E "FAILED|failed" $OUT/gpu_tests.log | grep -v " 0 failed" | head -10
use dwarps
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py -k "fused_one_shot or vs_oracle" > $OUT/dwarps_tests.log 2>&1
echo "dwarps epilogue tests: exit $?: $(tail -1 $OUT/dwarps_tests.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/dwarps_tests.log | head
E="--epilogue add_rmsnorm --sizes 8K:256K:2"
for v in main18 dwarps main18 dwarps; do
  use $v
  for h in 4096 8192; do qb $E --hidden $h --methods qr_fused_lossless --csv $OUT/$v-h$h-$SECONDS.csv; done
done
qb --sizes 8K:256K:2 --methods qr_one_shot --csv $OUT/plain.csv
echo "[$SECONDS s]"
grep -E "variant|qr_fused|qr_one_shot" $L | grep -vE "┃" | tail -70
bash scripts/gpu_check.sh fold > /dev/null
