#!/usr/bin/env bash
# Ready for the next session, 4 GPUs (4-GPU kinds were withdrawn mid-session 2026-11-27): issue 43 at W = 4 with
# the current exchange (per-segment CTA shares, the start/plan barrier cut): the whole `bench moe` (layer 1-16384
# tokens a rank, the dynamic-vs-host call) for results/<machine>/moe.csv, the skew probe, and the GPU tests at W = 4.
# Build first: WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh main && bash lab/scripts/engine_gpu_check.sh pack main
# Carry .wheels/main-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=200 QR_DYNAMIC_REPLAYS=300 timeout 130 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -16
timeout 90 python3 lab/probes/a2a_skew.py 2048,8192,32768 > $OUT/a2a-skew.txt 2>&1
echo "a2a skew: exit $? [$SECONDS s]"; grep -v Warning $OUT/a2a-skew.txt | tail -13
left=$((580 - SECONDS))
timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096,16384 --iters 10 --timeout $((left - 5)) \
  --csv $OUT/moe.csv > /tmp/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; cat /tmp/moe.log >> $L; grep -E "T=  4096|T= 16384" /tmp/moe.log | tail -30
