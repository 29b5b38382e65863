#!/usr/bin/env bash
# 2 GPUs (asked nvidia-h200-x2, ran on 2x H100, 2026-11-28): main b40b4d5 (per-rank CTA size of the all-to-all with split sizes):
# the GPU tests of the all-to-all family at W = 2, then the whole `bench moe` (--iters 20) for results/h200-x2/moe.csv
# (its a2a part predated the dynamic call's start/plan barrier cut). Carry .wheels/pair-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use pair-ext > /dev/null
QR_TEST_WORLD_SIZE=2 QR_DYNAMIC_REPLAYS=1000 \
  QR_TEST_SCENARIOS=mixed_cta_all_to_all,uneven_all_to_all,collectives_vs_twin,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -8
timeout 200 python3 -m quickreduce.cli bench moe --no-multicast --gpus 2 --tokens 1,32,256,4096,16384 --iters 20 --timeout 195 \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe W=2: exit $? [$SECONDS s]"; grep -E "^a2a|uniform  (qr_graph |nccl)|16384.*(qr_graph |nccl)" $OUT/moe.log
