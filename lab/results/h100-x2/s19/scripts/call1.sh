#!/usr/bin/env bash
# Session 19 call 1 (2 GPUs; the tree has lab/wip/fused-two-shot-owner-stats.patch and
# lab/wip/rotation-lane-signs.patch applied; wheels `main` = b535012, `combo` = both patches).
# (1) issue 30: the lane-signs rotation against the twin on a GPU, codec-speed main/combo alternated;
# (2) issue 27: the owner-statistics fused two-shot with its loads issued ahead, against two kernels.
set -uo pipefail
DEVICE_LOG=call1.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use combo
QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values timeout 200 python3 -m pytest -q -s -p no:cacheprovider \
  tests/gpu/test_dist.py > $OUT/tests.log 2>&1
echo "rotation twin tests on 2 GPUs: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_codec_speed_gpu.py >> $OUT/tests.log 2>&1
echo "codec_speed tests: $(tail -1 $OUT/tests.log) [$SECONDS s]"
speed() {  # one codec-speed run into $OUT/codec-speed.csv, the variant as its first column
  timeout 60 python3 -m quickreduce.cli codec-speed --codecs int4,int4h,int6,int6h --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $1: exit $?"; cat /tmp/cs.txt >> $L; grep -E "^ *int" /tmp/cs.txt
  [ -f $OUT/codec-speed.csv ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > $OUT/codec-speed.csv
  sed 1d /tmp/cs.csv | sed "s/^/$1,/" >> $OUT/codec-speed.csv; }
for r in 1 2; do use main; speed main-$r; use combo; speed combo-$r; done
echo "[$SECONDS s]"
QR_TEST_SCENARIOS=epilogue_fused_two_shot,epilogue_vs_oracle timeout 120 python3 -m pytest -q -s -p no:cacheprovider \
  tests/gpu/test_epilogue_gpu.py >> $OUT/tests.log 2>&1
echo "epilogue tests on 2 GPUs: exit $?: $(tail -1 $OUT/tests.log) [$SECONDS s]"
grep -E "FAILED|checks" $OUT/tests.log | tail -5
E="--epilogue add_rmsnorm"
for f in 1 0; do
  export QUICKREDUCE_FUSED_EPILOGUE=$f
  qb $E --hidden 4096 --sizes 4M:64M:2 --methods qr_fused_int4,qr_fused_int4h --csv $OUT/h4096-f$f.csv
  qb $E --hidden 4096 --sizes 16M:64M:2 --methods qr_fused_lossless --csv $OUT/exact-f$f.csv
done
unset QUICKREDUCE_FUSED_EPILOGUE
echo "[$SECONDS s]"
grep -E "qr_fused" $L | grep -vE "┃" | tail -40
bash scripts/gpu_check.sh fold > /dev/null
