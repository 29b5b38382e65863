#!/usr/bin/env bash
# 2x H200. final-ext = main + two slices a step for fp32 too, in the reduce-scatter only (call bg: fp32up made the
# fp32 reduce-scatter 5-13% faster at 128-512 MB and its all-gather / all-to-all up to 23% slower); the fp32
# all-gather / all-to-all keep one slice a step (their two-up code compiled out). Tests; fp32 A B A B against
# main2-ext (= main before); then the fp32 family with final and the built-in h200-w2 table (re-tuned in call bg).
# Expectation: fp32 reduce-scatter as fp32up's (5-13% faster from 128 MB), all-gather / all-to-all as main2's.
# Carry .wheels/main2-ext .wheels/final-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use final-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,coded_small_segments,collective_graph_replays,fp32_all_reduce \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-final.log 2>&1
echo "tests final: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-final.log | tail -8
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized,dynamic_graph_replays timeout 60 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider >> $OUT/tests-final.log 2>&1
echo "tests final dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-final.log | tail -3
for v in main2 final main2 final; do
  use $v-ext > /dev/null
  DEV_DTYPE=fp32 DEV_SIZES=8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 \
    timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange fp32 $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/dev-exchange.log
done
python3 - $OUT/dev-exchange.log <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "kind": head = f[2:]; continue
    for col, x in zip(head, f[3:]): t[(f[1], int(f[2]), col)][f[0]].append(float(x))
for key, runs in sorted(t.items()):
    if key[2] == "nccl": continue
    print(f"fp32 {key[0]:4s} {key[1]:>10d} {key[2]:9s} main2 " + "/".join(f"{x:.2f}" for x in runs["main2"]) + "  final "
          + "/".join(f"{x:.2f}" for x in runs["final"]) + "   final/main %.3f" % (min(runs["final"]) / min(runs["main2"])))
PY
use final-ext > /dev/null
timeout 120 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
  --dtype fp32 --sizes 8K:1G:4 --timeout 115 --csv $OUT/family-fp32.csv > /tmp/family-fp32.log 2>&1
echo "family fp32: exit $? [$SECONDS s]"; cat /tmp/family-fp32.log >> $L
