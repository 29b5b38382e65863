#!/usr/bin/env bash
# 4 GPUs: (1) the coded path loading every segment's lane before the encodes (s23c) against s23b, A/B
# alternated. Expectation written before the run: reduce-scatter and all-to-all codecs at 8-128 KB
# 1-1.5 us less (one HBM latency for W - 1 segments instead of one each); all-gather unchanged.
# (2) the coded tests at W = 4 on s23c; (3) the family with every peer on s23c (bf16, 8K:1G:4) for
# results/h100-x4/family-bf16.csv; (4) e2e llama3-70b TP = 4 under the built-in table (one-kernel rs_ag).
# Carry .wheels/s23b-ext, .wheels/s23c-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
peers
for v in s23b-ext s23c-ext s23b-ext s23c-ext; do
  use $v > /dev/null
  timeout 40 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_fp8,qr_int4,qr_int6h --sizes 8K:2M:4 --timeout 38 --csv /tmp/rs.csv > /tmp/rs.log 2>&1
  echo "ab $v: exit $? [$SECONDS s]"; cat /tmp/rs.log >> $L; sed 1d /tmp/rs.csv | sed "s/^/$v,/" >> $OUT/prefetch-ab.csv
done
python3 - $OUT/prefetch-ab.csv <<'PY'
import collections, csv, sys
t = collections.defaultdict(list)
for r in csv.reader(open(sys.argv[1])):
    t[(r[-1], r[4], int(r[1]))].append(f"{r[0][:4]}:{float(r[5]):6.1f}")
for k in sorted(t): print(*k, *t[k])
PY
use s23c-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=300 QR_TEST_SCENARIOS=coded_small_segments,collective_mismatch \
  timeout 90 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-collectives.log 2>&1
echo "collective tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-collectives.log | tail -6
timeout 200 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
  --sizes 8K:1G:4 --timeout 195 --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
echo "family: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
left=$((590 - SECONDS))
timeout $left python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout $((left - 5)) --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
