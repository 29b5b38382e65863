#!/usr/bin/env bash
# 4 GPUs, wheel `main` (= 919f937's C++: packet_blocks / packet_all_reduce_chunk helpers). First: the GPU
# collective tests after the rank_order_sum refactor and the two host-side helpers (never GPU-run); the
# exact uneven all-to-all under skew against NCCL (lab/probes/a2a_skew.py: why the skewed MoE layer loses);
# one sweep of the coded small path's outlier sizes.
# Carry .wheels/main-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
use main-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=200 timeout 170 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "collective tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -14
timeout 150 python3 lab/probes/a2a_skew.py 2048,8192,32768 > $OUT/a2a-skew.txt 2>&1
echo "a2a skew: exit $? [$SECONDS s]"; cat $OUT/a2a-skew.txt | grep -v Warning | tail -16
timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --methods 'qr_*' --sizes 8K,32K,128K,512K --replays 21 --timeout 55 --csv $OUT/sweep-1.csv > /tmp/s.log 2>&1
echo "sweep: exit $? [$SECONDS s]"; cat /tmp/s.log >> $L
