#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: main with the W = 4 two-shot defaults and the dynamic all-to-all (wheel main1).
# tune (all-reduce + segment collectives, bf16) -> the built-in table for this machine; the full bench with
# every peer under it; e2e llama3-70b TP = 4; the dynamic all-to-all's GPU tests and a short MoE bench at
# W = 4; tests/gpu at 4 ranks last (what time is left). Run from the repo root; Python from .snap.
set -uo pipefail  # $OUT brings back 8 files: logs go into $L
cd .snap && ln -sfn ../.wheels .wheels && ln -sfn ../.peers .peers
DEVICE_LOG=w4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
peers
use main1
timeout 90 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 85 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]" | tee -a $L
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 120 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 115 \
  --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/bench.log >> $L; tail -22 /tmp/bench.log
timeout 80 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 75 --csv $OUT/e2e-llama3-70b-tp4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/e2e.log >> $L; grep -A6 "time_ms ('\*'" /tmp/e2e.log
unset QUICKREDUCE_TUNE_FILE
QR_TEST_WORLD_SIZE=4 timeout 100 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/moe-tests.log 2>&1
echo "dynamic all-to-all tests W=4: exit $? $(tail -1 $OUT/moe-tests.log) [$SECONDS s]" | tee -a $L
timeout 70 python3 -m quickreduce.cli bench moe --gpus 4 --tokens 1,32,256,4096 --iters 10 --timeout 65 --csv $OUT/moe-w4.csv > /tmp/moe.log 2>&1
echo "moe bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/moe.log >> $L; tail -25 /tmp/moe.log
left=$((585 - SECONDS))
QR_TEST_WORLD_SIZE=4 QR_TEST_HANG_DUMP_S=$((left - 20)) timeout $left python3 -m pytest -q -s -p no:cacheprovider tests/gpu \
  --ignore=tests/gpu/test_all_to_all_dynamic_gpu.py > $OUT/gpu_tests_w4.log 2>&1
echo "tests/gpu W=4: exit $? $(tail -1 $OUT/gpu_tests_w4.log) [$SECONDS s]" | tee -a $L
