#!/usr/bin/env bash
# Session 20 call 8 (2 GPUs): the new `nccl_copy` bench method and `tune` timing NCCL through it, on GPUs
# (wheel `head`: the kernels are unchanged since 6dbdffb; the tree's Python).
set -uo pipefail
DEVICE_LOG=call8.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
timeout 100 python3 -m quickreduce.cli bench --methods nccl,nccl_copy,qr_two_shot,qr_auto --sizes 8K:1G:4 --timeout 95 \
  --csv $OUT/nccl-copy.csv >> $L 2>&1
echo "bench: exit $? [$SECONDS s]"
timeout 100 python3 -m quickreduce.cli tune --sizes 8K:256M:4 --dtypes bf16 --timeout 95 --out $OUT/tuned.json \
  --csv $OUT/tune.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"; grep -c nccl_copy $OUT/tune.csv
bash scripts/gpu_check.sh fold > /dev/null
