#!/usr/bin/env bash
# Session 19 call 6 (one H100): codec-speed of the landed codecs (`final`, 5b6f85f: its codec kernels are
# HEAD's) against `base` (2c3937d), alternated, for the README's H100 figure (call 2 measured `full`).
set -uo pipefail
DEVICE_LOG=call6.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
speed() {
  timeout 60 python3 -m quickreduce.cli codec-speed --codecs int4,int4h,int6,int6h,int8 "${@:2}" --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $1: exit $?"; cat /tmp/cs.txt >> $L; grep -E "^ *(int|fp)" /tmp/cs.txt
  [ -f $OUT/codec-speed.csv ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > $OUT/codec-speed.csv
  sed 1d /tmp/cs.csv | sed "s/^/$1,/" >> $OUT/codec-speed.csv; }
for r in 1 2; do use base; speed base-$r; use final; speed final-$r; done
use final; speed final-fp16 --dtype fp16
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
