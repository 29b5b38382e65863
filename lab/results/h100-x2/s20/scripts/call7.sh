#!/usr/bin/env bash
# Session 20 call 7 (4 GPUs): the W = 4 two-shot defaults from call 6's sweep. Wheels: `head` (6dbdffb),
# `w4a` (4 GPUs: CTAs of 512 from 64 tiles; pipeline groups counted by bytes pushed to each peer, every
# codec), `w4p` (the same, groups per peer for the passthrough only). A/B head / w4a / w4p / head at
# W = 4, then the better of w4a and w4p (codec rows from 16 MB) is tuned, benched with every peer and
# run through every GPU test at 4 ranks.
set -uo pipefail
DEVICE_LOG=call7.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
peers
for v in head w4a w4p head; do
  use $v
  timeout 90 python3 -m quickreduce.cli bench --gpus 4 --timeout 85 --replays 9 --methods qr_two_shot,qr_lossless,qr_int4,qr_int6,qr_fp8 \
    --sizes 512K:1G --dtype bf16 --csv /tmp/ab.csv >> $L 2>&1
  echo "A/B $v: exit $? [$SECONDS s]"
  [ -f $OUT/ab-w4.csv ] || sed -n 1p /tmp/ab.csv | sed 's/^/variant,/' > $OUT/ab-w4.csv
  sed 1d /tmp/ab.csv | sed "s/^/$v,/" >> $OUT/ab-w4.csv
done
ab_rows $OUT/ab-w4.csv variant | tee -a $L
best=$(python3 - $OUT/ab-w4.csv <<'PY'
import csv, sys, collections
t = collections.defaultdict(float)
for r in csv.DictReader(open(sys.argv[1])):
    if r["variant"] in ("w4a", "w4p") and r["method"] != "qr_two_shot" and int(r["size_bytes"]) >= 16 << 20:
        t[r["variant"]] += float(r["time_us"])
print(min(t, key=t.get))
PY
)
echo "chosen: $best $(python3 -c 'print(1)')" | tee -a $L
use $best
timeout 100 python3 -m quickreduce.cli tune --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16,fp32 \
  --sizes 8K:1G:2 --timeout 95 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache > /tmp/tune.log 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
timeout 110 python3 -m quickreduce.cli bench --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 105 --csv $OUT/bench-w4.csv > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"
unset QUICKREDUCE_TUNE_FILE
QR_TEST_WORLD_SIZE=4 QR_TEST_HANG_DUMP_S=170 timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests_w4.log 2>&1
echo "tests/gpu W=4 ($best): exit $? $(tail -1 $OUT/gpu_tests_w4.log) [$SECONDS s]"; grep -E "FAILED|Timeout|Error:|checks, [1-9]" $OUT/gpu_tests_w4.log | head -12
bash scripts/gpu_check.sh fold > /dev/null
