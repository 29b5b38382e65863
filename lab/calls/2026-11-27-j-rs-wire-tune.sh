#!/usr/bin/env bash
# 4 GPUs: (1) the coded reduce-scatter's wire laid out by warps (s23b: each store instruction writes 32
# consecutive vectors) against lane-interleaved (s23a), A/B alternated. Expectation written before the
# run: the coded bf16 reduce-scatter at 512 KB from ~13 us to ~7-8 (AG's ratio to the exact packets,
# ~1.3x), at 2 MB from 24-42 us to ~13-15 (twice the exact path's link bytes); AG and A2A unchanged.
# (2) the coded path's tests at W = 4 on s23b; (3) `quickreduce tune` at W = 4 (all-reduce with the fused
# rs_ag, and the family) and the all-reduce bench with every peer under the new table.
# Carry .wheels/s23a-ext, .wheels/s23b-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
peers
for v in s23a-ext s23b-ext s23a-ext s23b-ext; do
  use $v > /dev/null
  timeout 40 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_fp8,qr_int8,qr_int4,qr_int6h --sizes 8K:2M:4 --timeout 38 --csv /tmp/rs.csv > /tmp/rs.log 2>&1
  echo "rs $v: exit $? [$SECONDS s]"; cat /tmp/rs.log >> $L; sed 1d /tmp/rs.csv | sed "s/^/$v,/" >> $OUT/rs-ab.csv
done
python3 - $OUT/rs-ab.csv <<'PY'
import collections, csv, sys
t = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    t[(r[-1], r[4], int(r[1]))].append(f"{r[0][:4]}:{float(r[5]):6.1f}")
for k in sorted(t): print(*k, *t[k])
PY
use s23b-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=300 QR_TEST_SCENARIOS=coded_small_segments,collective_mismatch \
  timeout 90 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-collectives.log 2>&1
echo "collective tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-collectives.log | tail -6
timeout 120 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 115 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
left=$((585 - SECONDS))
timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout $((left - 5)) \
  --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L; tail -22 /tmp/bench.log
