#!/usr/bin/env bash
# Session 19 call 3 (2 GPUs): wheel `full2` = `full` (call 2) + the forward rotation's 2^-5 moved onto
# the block's scale arithmetic (LaneIO::rotate_encode; the spec's path again from the input for
# bf16 blocks >= 2^125). Its checks on 2 GPUs, then codec-speed base/full/full2 alternated, then the
# int4/int4h all-reduce base against full2 from 64 MB.
set -uo pipefail
DEVICE_LOG=call3.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use full2
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_codec_speed_gpu.py > $OUT/tests.log 2>&1
echo "codec_speed tests: $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "FAILED|mismatch" $OUT/tests.log | head -5
QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values,graph_replays,collectives_vs_twin,uneven_all_to_all,fp32_all_reduce,small_segments,collective_graph_replays \
  timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_dist.py tests/gpu/test_collectives.py >> $OUT/tests.log 2>&1
echo "2-GPU tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests.log | tail -9
speed() {  # one codec-speed run into $OUT/codec-speed.csv, the variant as its first column
  timeout 60 python3 -m quickreduce.cli codec-speed --codecs int4,int4h,int6,int6h "${@:2}" --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $1: exit $?"; cat /tmp/cs.txt >> $L; grep -E "^ *int" /tmp/cs.txt
  [ -f $OUT/codec-speed.csv ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > $OUT/codec-speed.csv
  sed 1d /tmp/cs.csv | sed "s/^/$1,/" >> $OUT/codec-speed.csv; }
for r in 1 2; do for v in base full full2; do use $v; speed $v-$r; done; done
use full2; speed full2-fp16 --dtype fp16
echo "[$SECONDS s]"
for v in base full2 base full2; do
  use $v; qb --sizes 64M:1G:4 --methods qr_int4,qr_int4h,qr_int6,qr_int6h --csv /tmp/ar.csv
  [ -f $OUT/all-reduce.csv ] || sed -n 1p /tmp/ar.csv | sed 's/^/variant,/' > $OUT/all-reduce.csv
  sed 1d /tmp/ar.csv | sed "s/^/$v,/" >> $OUT/all-reduce.csv
done
grep -E "qr_int" $L | grep -vE "┃" | tail -32
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
