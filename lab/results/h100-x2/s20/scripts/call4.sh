#!/usr/bin/env bash
# Session 20 call 4 (2 GPUs): `quickreduce tune` on 2x H200 at HEAD (wheel `head` = 6dbdffb), the all-reduce and,
# for the first time on H200, the segment collectives (bf16, fp32), replacing session 10's all-reduce-only table;
# then the full bench with every peer under the new table (the README's table).
set -uo pipefail
DEVICE_LOG=call4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
timeout 440 python3 -m quickreduce.cli tune --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16,fp32 \
  --sizes 8K:1G:2 --timeout 430 --out $OUT/tuned.json --csv $OUT/tune.csv --no-cache > $OUT/tune.log 2>&1
echo "tune: exit $? [$SECONDS s]"; tail -4 $OUT/tune.log
peers
[ -f $OUT/tuned.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned.json
timeout 100 python3 -m quickreduce.cli bench --sizes 8K:1G --dtype bf16 --timeout 95 --csv $OUT/bench.csv > $OUT/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; tail -3 $OUT/bench.log
bash scripts/gpu_check.sh fold > /dev/null
