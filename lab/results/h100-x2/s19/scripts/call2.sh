#!/usr/bin/env bash
# Session 19 call 2 (one GPU): wheels `base` (2c3937d: lane signs) and `full` (+ the integer codecs'
# clamp skipped for normal scales, + the inverse rotation's factors skipped for moderate scales with
# its signs on the last level's operands: a spec change in the sign of zeros). Checks of `full` with
# every rank on the one GPU (W = 2, 4), then codec-speed base/full alternated (bf16 twice, fp16 once).
set -uo pipefail
DEVICE_LOG=call2.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use full
for w in 2 4; do
  QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$w QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values,collectives_vs_twin,uneven_all_to_all,fp32_all_reduce \
    timeout 240 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_dist.py tests/gpu/test_collectives.py > $OUT/tests-w$w.log 2>&1
  echo "shared W=$w: exit $? $(tail -1 $OUT/tests-w$w.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests-w$w.log | head -8
done
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_codec_speed_gpu.py > $OUT/cs-tests.log 2>&1
echo "codec_speed tests: $(tail -1 $OUT/cs-tests.log) [$SECONDS s]"
speed() {  # one codec-speed run into $OUT/codec-speed.csv, the variant as its first column
  timeout 60 python3 -m quickreduce.cli codec-speed --codecs int4,int4h,int6,int6h,int8 "${@:2}" --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $1: exit $?"; cat /tmp/cs.txt >> $L; grep -E "^ *int" /tmp/cs.txt
  [ -f $OUT/codec-speed.csv ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > $OUT/codec-speed.csv
  sed 1d /tmp/cs.csv | sed "s/^/$1,/" >> $OUT/codec-speed.csv; }
for r in 1 2; do use base; speed base-$r; use full; speed full-$r; done
use base; speed base-fp16 --dtype fp16; use full; speed full-fp16 --dtype fp16
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
