#!/usr/bin/env bash
# Session 20 call 2 (2 GPUs): the full all-reduce bench with every peer at HEAD (wheel `head` = 6dbdffb),
# the first since session 10's (bench/results/h200-x2.csv), then the epilogue bench at hidden 4096
# beside FlashInfer's fused op.
set -uo pipefail
DEVICE_LOG=call2.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
use head
peers
timeout 340 python3 -m quickreduce.cli bench --sizes 8K:1G --dtype bf16 --timeout 330 --csv $OUT/bench.csv > $OUT/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; tail -5 $OUT/bench.log
timeout 120 python3 -m quickreduce.cli bench --epilogue add_rmsnorm --hidden 4096 --sizes 8K:64M:4 --timeout 110 \
  --csv $OUT/epilogue-h4096.csv > $OUT/epilogue-h4096.log 2>&1
echo "epilogue bench: exit $? [$SECONDS s]"; tail -3 $OUT/epilogue-h4096.log
bash scripts/gpu_check.sh fold > /dev/null
