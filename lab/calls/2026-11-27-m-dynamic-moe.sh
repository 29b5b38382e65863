#!/usr/bin/env bash
# 4 GPUs, s23d: the dynamic all-to-all (its plan now one thread a destination) at W = 8 on one shared
# GPU (50 graph replays); the whole `bench moe` (the call against the host-sized one, the
# MoE layer at 1-4096 tokens) for results/h100-x4/moe.csv. Carry .wheels/s23d-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
peers
use s23d-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=50 \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests-dynamic-w8.log 2>&1
echo "dynamic tests W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-dynamic-w8.log | tail -6
left=$((390 - SECONDS))
timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096 --iters 10 --timeout $((left - 5)) \
  --csv $OUT/moe.csv > /tmp/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; cat /tmp/moe.log >> $L; tail -40 /tmp/moe.log
