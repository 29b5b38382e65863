#!/usr/bin/env bash
# 4x H100 (2026-11-28): the all-to-all whose sizes cross at 512 threads, ONE CTA an SM (wheel a2ag: a2aw's slice-width
# rule, the even all-to-all back at 256, the grid 132 x 512), so the next call's CTAs fit beside a running call's
# under PDL. Expectation: a2a part (PDL on) within 0.5 us of main at 8 KB-8 MB; >= 32 MB a rank 3-10% faster than
# main (between main and a2aw); the layer no slower than main at 32-256 tokens, 1-2% faster at 16384.
# Tests first (uneven and dynamic all-to-all at W = 4). Carry .wheels/main-ext, .wheels/a2ag-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use a2ag-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=uneven_all_to_all,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  QR_DYNAMIC_REPLAYS=200 timeout 80 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -8
for v in main a2ag main a2ag; do
  use $v-ext > /dev/null
  timeout 40 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part a2a --iters 20 --timeout 35 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-ab.csv; cat /tmp/a2a.log >> $L
done
ab_a2a $OUT/a2a-ab.csv main a2ag
for v in main a2ag main a2ag; do
  use $v-ext > /dev/null
  timeout 50 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part layer --tokens 32,256,16384 --iters 10 --timeout 45 \
    --csv /tmp/moe.csv > /tmp/moe.log 2>&1
  echo "moe layer $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/moe.csv >> $OUT/layer-ab.csv; cat /tmp/moe.log >> $L
done
python3 - $OUT/layer-ab.csv <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    v, rest = line.rstrip("\n").split(",", 1)
    if rest.startswith("part"): head = rest.split(","); continue
    r = dict(zip(head, rest.split(",")))
    if r["method"] in ("qr_graph", "nccl"): t[(r["model"], int(r["tokens"]), r["skew"], r["method"])][v].append(r["us"])
for k, d in sorted(t.items()): print(*k, *(f"{v} " + " ".join(d[v]) for v in ("main", "a2ag")))
PY
