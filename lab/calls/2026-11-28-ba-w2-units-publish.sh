#!/usr/bin/env bash
# 2 GPUs (nvidia-h200-x2). 1. lab/wip/coded-units-all-kinds.patch (wheel llall-ext): GPU tests at W = 2, then A B A B
# against main (main-ext, built from main at 55d6a2d) of the all-gather and all-to-all at 8 KB-2 MB, bf16 and fp32.
# Expectation (lab/NOTES, session 29): all-to-all 8-512 KB 0.2-0.6 us faster, fp32 all-gather / all-to-all 20-40%
# faster, the bf16 all-gather unchanged or slower. 2. main: re-tune this machine (all-reduce and the family; the
# built-in h200-w2 table predates the reduce-scatter's LL units), then the family bf16 and fp32 with that table.
# Carry .wheels/main-ext .wheels/llall-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use llall-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,coded_small_segments,small_segments \
  timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-llall-w$gpus.log 2>&1
echo "tests llall W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-llall-w$gpus.log | tail -6
for dt in bf16 fp32; do
  for v in main llall main llall; do
    [ $dt = fp32 ] && [ $SECONDS -gt 200 ] && continue
    use $v-ext > /dev/null
    DEV_DTYPE=$dt DEV_CALLS=200 DEV_SIZES=8K,32K,128K,512K,2 DEV_KINDS=ag,a2a DEV_CODECS=fp16,fp8,int6,int4,int4h DEV_THREADS=0 \
      timeout 60 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt $v: exit $? [$SECONDS s]"; sed "s/^/$dt $v /" /tmp/dx.log | tee -a $OUT/dev-exchange.log | grep -E "(kind|ag|a2a) "
  done
done
use main-ext > /dev/null
timeout 150 python3 -m quickreduce.cli tune --no-multicast --gpus $gpus --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 145 --out $OUT/tuned-w2.json --csv $OUT/tune-w2.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w2.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w2.json
for dt in bf16 fp32; do
  left=$((585 - SECONDS)); [ $left -lt 40 ] && break
  timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-$dt.csv > $OUT/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"
done
