#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28): republish after the one-fence announce (main 47d22aa; wheel fence-ext
# = that tree's C++). tune -> the h100-w4 table (all-reduce and the family), the all-reduce bench with every peer
# under it, e2e llama3-70b TP = 4, the family with every peer. Carry .wheels/fence-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
peers
use fence-ext > /dev/null
timeout 150 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 145 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 145 \
  --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L
timeout 120 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 115 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
left=$((590 - SECONDS))
timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
