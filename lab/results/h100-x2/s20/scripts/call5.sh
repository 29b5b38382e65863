#!/usr/bin/env bash
# Session 20 call 5 (4 GPUs, the first 4-GPU machine this project has been lent; issue 7): HEAD (wheel `head`
# = 6dbdffb) at world size 4 on 4 GPUs: `quickreduce tune` (all-reduce and segment collectives), the full
# bench with every peer under that table, then every GPU test at 4 ranks.
set -uo pipefail
DEVICE_LOG=call5.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a $L
nvidia-smi topo -m 2>&1 | head -8 | tee -a $L
use head
peers
timeout 150 python3 -m quickreduce.cli tune --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16,fp32 \
  --sizes 8K:1G:2 --timeout 140 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache > $OUT/tune.log 2>&1
echo "tune: exit $? [$SECONDS s]"; tail -3 $OUT/tune.log
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 150 python3 -m quickreduce.cli bench --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 140 --csv $OUT/bench-w4.csv > $OUT/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; grep -E "^note|rror" $OUT/bench.log | head -12
unset QUICKREDUCE_TUNE_FILE
QR_TEST_WORLD_SIZE=4 QR_TEST_HANG_DUMP_S=200 timeout 250 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests_w4.log 2>&1
echo "tests/gpu W=4: exit $? $(tail -1 $OUT/gpu_tests_w4.log) [$SECONDS s]"; grep -E "FAILED|Timeout|Error:|checks, [1-9]" $OUT/gpu_tests_w4.log | head -12
bash scripts/gpu_check.sh fold > /dev/null
