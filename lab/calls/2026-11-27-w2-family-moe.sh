#!/usr/bin/env bash
# 2026-11-27, 2 GPUs (asked as nvidia-h200-x2), main1: the all-reduce bench with every peer (nccl_symm new)
# under the built-in table, the collective family in bf16 and fp32 with nccl_symm (never benched on 2x H200
# before), the dynamic all-to-all's GPU tests, memcheck over its bad-count and graph scenarios, a short
# MoE bench, and e2e llama3-8b TP = 2. Run from the repo root; Python from .snap.
set -uo pipefail  # $OUT brings back 8 files: logs go into $L
cd .snap && ln -sfn ../.wheels .wheels && ln -sfn ../.peers .peers
DEVICE_LOG=w2.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
peers
use main1
timeout 110 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --sizes 8K:1G --dtype bf16 --timeout 105 \
  --csv $OUT/bench-w2.csv --plot $OUT/bench-w2.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/bench.log >> $L; tail -22 /tmp/bench.log
for dt in bf16 fp32; do
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus 2 --collective reduce_scatter,all_gather,all_to_all --dtype $dt \
    --sizes 8K:1G:4 --timeout 55 --csv $OUT/family-w2-$dt.csv > /tmp/family.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/family.log >> $L
done
QR_TEST_WORLD_SIZE=2 timeout 80 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > /tmp/moe-tests.log 2>&1
echo "dynamic all-to-all tests W=2: exit $? $(tail -1 /tmp/moe-tests.log) [$SECONDS s]" | tee -a $L; cat /tmp/moe-tests.log >> $L
QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=dynamic_bad_counts,dynamic_graph_replays QR_DYNAMIC_REPLAYS=20 timeout 100 \
  compute-sanitizer --tool memcheck --target-processes all --report-api-errors no python3 -m pytest -q -s \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > /tmp/memcheck.log 2>&1
echo "memcheck dynamic: exit $? $(grep -c 'ERROR SUMMARY: 0 errors' /tmp/memcheck.log) clean summaries [$SECONDS s]" | tee -a $L
grep -m5 -E "ERROR SUMMARY|Invalid|passed|failed" /tmp/memcheck.log | tee -a $L
timeout 70 python3 -m quickreduce.cli bench moe --gpus 2 --tokens 1,32,256,4096 --iters 10 --timeout 65 --csv $OUT/moe-w2.csv > /tmp/moe.log 2>&1
echo "moe bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/moe.log >> $L; tail -25 /tmp/moe.log
timeout 80 python3 -m quickreduce.cli e2e --no-multicast --model llama3-8b --layers 4 --gpus 2 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 75 --csv $OUT/e2e-llama3-8b-tp2.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e 8b: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/e2e.log >> $L; grep -A6 "time_ms ('\*'" /tmp/e2e.log
