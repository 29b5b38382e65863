#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28): call ae's bench read rs_ag at 2 MB as 39.9 us (auto, the same kernel, 21.0)
# where call ab's read 15.9: repeat rs_ag / auto / two-shot at 1-4 MB three times to see if it recurs. Then W = 2 tests
# of the current main (one peer: the announce change is a no-op there) on GPUs 0-1. Carry .wheels/fg-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use fg-ext > /dev/null
for i in 1 2 3; do
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --methods qr_rs_ag,qr_auto,qr_two_shot --sizes 1M,1536K,2M,3M,4M --dtype bf16 \
    --replays 9 --timeout 55 --csv /tmp/r.csv > /tmp/r.log 2>&1
  echo "bench $i: exit $? [$SECONDS s]"; sed "s/^/$i,/" /tmp/r.csv >> $OUT/rs-ag-repeat.csv
done
python3 - $OUT/rs-ag-repeat.csv <<'PY'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    run, rest = line.split(",", 1)
    if rest.startswith("size_bytes"): continue
    f = rest.split(","); t[(f[3], int(f[0]))].append(f[4])
for k, v in sorted(t.items()): print(k, *v)
PY
CUDA_VISIBLE_DEVICES=0,1 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=passthrough_reference,codecs_vs_twin,graph_replays timeout 120 python3 -m pytest -q -s \
  tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-w2.log 2>&1
echo "tests W=2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w2.log | tail -4
