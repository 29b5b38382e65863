#!/usr/bin/env bash
# 2026-11-27, 4 GPUs, after w4-ab: the chosen variant ($VARIANT) through tests/gpu at 4 ranks, `e2e` on the
# llama3-70b preset at TP = 4 (4 layers) with every exact peer and auto/auto:int6/auto:int4 under the table
# tune wrote ($TUNE: carried in .snap/tuned-w4.json), and the collective family at W = 4 with nccl_symm.
set -uo pipefail
cd .snap && ln -sfn ../.wheels .wheels && ln -sfn ../.peers .peers
DEVICE_LOG=w4e2e.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
peers
use ${VARIANT:-head}
[ -f tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$PWD/tuned-w4.json
timeout 190 python3 -m quickreduce.cli e2e --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4,qr_int4 \
  --timeout 180 --csv $OUT/e2e-llama3-70b-tp4.csv --no-plot > $OUT/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]" | tee -a $L; tail -40 $OUT/e2e.log
timeout 130 python3 -m quickreduce.cli bench --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 125 --csv $OUT/family-w4-bf16.csv > $OUT/family.log 2>&1
echo "family: exit $? [$SECONDS s]" | tee -a $L; tail -30 $OUT/family.log
QR_TEST_WORLD_SIZE=4 QR_TEST_HANG_DUMP_S=150 timeout 170 python3 -m pytest -q -x -p no:cacheprovider tests/gpu > $OUT/gpu_tests_w4.log 2>&1
echo "tests/gpu W=4 (${VARIANT:-head}): exit $? $(tail -1 $OUT/gpu_tests_w4.log) [$SECONDS s]" | tee -a $L
grep -E "FAILED|Error" $OUT/gpu_tests_w4.log | head -10
