#!/usr/bin/env bash
# 2x H200. main-ext = main at d57d65b (the W = 2 input-bytes groups rule for the coded reduce-scatter / fp32
# all-gather). (1) CTA size of the fp32 all-gather / all-to-all at 128 / 512 MB (the rule's 256 against 512 and 128:
# the 256 cap was measured with bf16). (2) Re-tune this machine (all-reduce + family, bf16, 8K:1G:2). (3) The family,
# bf16 and fp32, with that table -> results/h200-x2/family-{bf16,fp32}.csv.
# Expectation: fp32 reduce-scatter fp8 128 MB ~80 us (3.7x NCCL), the rest as before within the runs' spread.
# Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
use main-ext > /dev/null
DEV_DTYPE=fp32 DEV_SIZES=128,512 DEV_KINDS=ag,a2a DEV_CODECS=fp8,int4 DEV_THREADS=0,128,512 \
  timeout 60 python3 lab/scripts/dev_exchange.py > $OUT/threads-fp32.log 2>&1
echo "threads fp32: exit $? [$SECONDS s]"; cat $OUT/threads-fp32.log
timeout 170 python3 -m quickreduce.cli tune --no-multicast --gpus $gpus --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 165 --out $OUT/tuned-w2.json --csv $OUT/tune-w2.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w2.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w2.json
for dt in bf16 fp32; do
  left=$((590 - SECONDS)); [ $left -lt 40 ] && break
  timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-$dt.csv > /tmp/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"; cat /tmp/family-$dt.log >> $L
  grep -E "^ *(33554432|134217728|536870912) " /tmp/family-$dt.log | head -60
done
