#!/usr/bin/env bash
# 2x H200 used as two single GPUs: correctness of w4up-ext (main + two slices a step at any W: the pushes and the
# all-gather / all-to-all receives; the reduce-scatter's sums stay one slice a step past W = 2, where two spilled
# 74-98 bytes) in the shared-GPU mode, W = 4 on GPU 0 and W = 8 on GPU 1 at once. No speed here: 4-GPU kinds are
# not lent; the A B waits for one (lab/calls/next-w4-two-up.sh).
# Carry .wheels/w4up-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
use w4up-ext > /dev/null
for w in 4 8; do
  gpu=$((w / 4 - 1))
  ( CUDA_VISIBLE_DEVICES=$gpu QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$w QR_TEST_SCENARIOS=large_segments_vs_twin,uneven_all_to_all,mixed_cta_all_to_all \
      timeout 330 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w$w-shared.log 2>&1
    echo "tests w4up W=$w shared: exit $? [$SECONDS s]" >> $OUT/status.log
    [ $w = 4 ] && CUDA_VISIBLE_DEVICES=$gpu QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$w QR_TEST_SCENARIOS=dynamic_vs_host_sized \
      timeout 150 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider >> $OUT/tests-w$w-shared.log 2>&1 \
      && echo "dynamic W=4 shared: exit 0 [$SECONDS s]" >> $OUT/status.log ) &
done
wait
cat $OUT/status.log; grep -hE "checks|passed|failed" $OUT/tests-w*-shared.log
