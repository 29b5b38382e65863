#!/usr/bin/env bash
# The A/B for lab/wip/fused-two-shot-owner-stats.patch (written in session 18, never run; build the
# patched tree as wheel `ownerq`, carry .wheels and .peers). Session 18 call 5's fused two-shot with its epilogue loads issued ahead
# (`ownerq`: the owner's residual at the top of its reduce step, the gather's residual and weights
# one slice ahead, the own slice's r and weights before the tile's row statistics): the fused
# two-shot scenario on 2 GPUs, then fused against the two kernels, same machine.
set -uo pipefail
DEVICE_LOG=call7.log source lab/scripts/device_lib.sh
SECONDS=0
use ownerq
QR_TEST_SCENARIOS=epilogue_fused_two_shot,epilogue_vs_oracle timeout 90 python3 -m pytest -q -s -p no:cacheprovider \
  tests/gpu/test_epilogue_gpu.py > $OUT/epilogue_tests.log 2>&1
echo "epilogue tests on 2 GPUs: exit $?: $(tail -1 $OUT/epilogue_tests.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/epilogue_tests.log | head
E="--epilogue add_rmsnorm"
for f in 1 0; do
  export QUICKREDUCE_FUSED_EPILOGUE=$f
  qb $E --hidden 4096 --sizes 4M:64M:2 --methods qr_fused_int4,qr_fused_int4h --csv $OUT/h4096-f$f.csv
  qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless --csv $OUT/exact-f$f.csv
done
echo "[$SECONDS s]"
grep -E "qr_fused" $L | grep -vE "┃" | tail -40
bash scripts/gpu_check.sh fold > /dev/null
