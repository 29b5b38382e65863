#!/usr/bin/env bash
# Ready (4 GPUs; ask nvidia-h200-x4 when `status` lists it, else nvidia-h100-x4): issue 40 and 39's republish with
# main (main-ext: main b40b4d5's C++). On 4x H200: tune -> the h200-w4 table, the all-reduce bench with every peer,
# e2e llama3-70b TP = 4. On either card: the family with every peer (bf16, 8K:1G:4), tests at W = 8 on one shared GPU,
# then the collective and all-reduce tests at W = 4 with the time left. (The 2026-11-27 call l with today's wheel.)
# Carry .wheels/main-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
peers
use main-ext > /dev/null
case "$gpu" in
  *H200*)
    timeout 100 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
      --sizes 8K:1G:2 --timeout 95 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
    echo "tune: exit $? [$SECONDS s]"
    [ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
    timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 145 \
      --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
    echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L
    timeout 120 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
      --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
      --timeout 115 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
    echo "e2e: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
    unset QUICKREDUCE_TUNE_FILE ;;
esac
timeout 100 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 95 --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_COLLECTIVE_REPLAYS=50 QR_TEST_SCENARIOS=coded_small_segments,small_segments \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8.log 2>&1
echo "collective tests W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w8.log | tail -5
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=passthrough_reference \
  timeout 100 python3 -m pytest -q -s tests/gpu/test_dist.py -p no:cacheprovider >> $OUT/tests-w8.log 2>&1
echo "dist tests W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w8.log | tail -3
left=$((585 - SECONDS))
[ $left -gt 30 ] && QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=300 timeout $left python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_dist.py \
  -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "collective + dist tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -25
