#!/usr/bin/env bash
# Session 19 call 4 (2 GPUs): wheel `final` = 5b6f85f (lane signs + the integer codecs' clamp skip).
# (1) every GPU test on 2 GPUs; (2) codec-speed base (2c3937d) / final; (3) the two-shot at a grid of
# 2 CTAs an SM (264) against the resident grid at 2-32 MB (session 18 call 6: at 2 CTAs an SM by
# launch bounds, lossless and int4h were 5-14% faster at 4-8 MB): is it the grid or the registers?
set -uo pipefail
DEVICE_LOG=call4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use final
QR_TEST_HANG_DUMP_S=200 timeout 400 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1
echo "tests/gpu: exit $? $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"; grep -E "FAILED|Error" $OUT/gpu_tests.log | head -8
speed() {
  timeout 60 python3 -m quickreduce.cli codec-speed --codecs int4,int4h,int6,int6h,int8,fp8 --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $1: exit $?"; cat /tmp/cs.txt >> $L; grep -E "^ *(int|fp)" /tmp/cs.txt
  [ -f $OUT/codec-speed.csv ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > $OUT/codec-speed.csv
  sed 1d /tmp/cs.csv | sed "s/^/$1,/" >> $OUT/codec-speed.csv; }
use base; speed base; use final; speed final
echo "[$SECONDS s]"
for r in 1 2; do
  DEV_SIZES=2,4,8,16,32 DEV_METHODS=two,two_b264,lossless,lossless_b264,int4h,int4h_b264,int4,int4_b264,fp8,fp8_b264 \
    timeout 150 python3 lab/scripts/dev_timing.py > /tmp/grid.txt 2>&1; echo "grid run $r: exit $?"; cat /tmp/grid.txt | tee -a $L | grep -vE "Warning|warn" | tail -7
done
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
