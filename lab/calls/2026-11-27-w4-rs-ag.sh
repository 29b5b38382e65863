#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: the rs_ag route (reduce-scatter + all-gather for 16-bit all-reduces; Python only, wheel
# main1). Its GPU scenarios at W = 4, an A/B beside the two-shot/one-shot and the fastest peers at 512K-64M,
# then tune (with qr_rs_ag as a candidate) -> h100-w4 table, the full bench and e2e 70B TP = 4 under it.
set -uo pipefail  # $OUT brings back 8 files: logs go into $L
cd .snap && ln -sfn ../.wheels .wheels && ln -sfn ../.peers .peers
DEVICE_LOG=w4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
peers
use main1
QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=passthrough_reference,graph_replays timeout 120 python3 -m pytest -q -s \
  tests/gpu/test_dist.py -p no:cacheprovider > /tmp/t.log 2>&1
echo "scenarios W=4: exit $? $(tail -1 /tmp/t.log) [$SECONDS s]" | tee -a $L; grep -E "checks|FAILED|rs_ag" /tmp/t.log | head -12 | tee -a $L
timeout 70 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --timeout 65 --replays 9 \
  --methods qr_rs_ag,qr_two_shot,qr_one_shot,qr_lossless,symm_mem_two_shot,vllm_custom \
  --sizes 512K,1M,2M,3M,4M,6M,8M,12M,16M,32M,64M --dtype bf16 --csv $OUT/rs-ag-ab.csv > /tmp/ab.log 2>&1
echo "A/B: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/ab.log >> $L; grep -A16 "time_us per call" /tmp/ab.log
timeout 90 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 85 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]" | tee -a $L
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 110 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 105 \
  --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/bench.log >> $L
timeout 60 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 4096,8192 --batches 64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 55 --csv $OUT/e2e-llama3-70b-tp4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/e2e.log >> $L; grep -A6 "time_ms ('\*'" /tmp/e2e.log
