#!/usr/bin/env bash
# 2x H200. (1) wide-ext = main + the 16-bit W = 2 exchange from 64 MB on the kernel bound to 3 CTAs of 512 an SM
# (call be: 3-13% faster at 128-512 MB). (2) twoup-ext = wide + two slices a step on 2 GPUs (16-bit): a thread
# issues both lanes' loads (the second held raw) before it encodes / decodes either, one barrier a pair.
# Registers: at 2 an SM 58-64, no spills; at 3 an SM 40 with 134-246 bytes of spills (wide: 24-92).
# QR_DEV_EXCHANGE_CTAS=2 keeps twoup at 2 an SM at every size.
# Expectation: twoup at 2 an SM 10-20% faster than main at 128-512 MB (push and decode each with two loads in flight
# a thread, so about the bytes in flight of 3 an SM without its spills), at least as fast as wide; twoup at 3 an SM
# no better than at 2 (spills). 2-32 MB: twoup at most even with main.
# Carry .wheels/wide-ext .wheels/twoup-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use twoup-ext > /dev/null
QR_DEV_EXCHANGE_CTAS=2 QR_TEST_WORLD_SIZE=$gpus \
  QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,collective_graph_replays,coded_small_segments \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-twoup.log 2>&1
echo "tests twoup c2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-twoup.log | tail -8
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized,dynamic_graph_replays \
  timeout 100 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider >> $OUT/tests-twoup.log 2>&1
echo "tests twoup dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-twoup.log | tail -3
for v in twoup wide; do
  use $v-ext > /dev/null
  QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin \
    timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-$v-large.log 2>&1
  echo "tests $v large (rule): exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-$v-large.log | tail -3
done
# Correctness of both on the sizes the rule moves (bench checks every row against float64 and across ranks).
for v in wide twoup; do
  use $v-ext > /dev/null
  timeout 80 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --sizes 48M,64M,96M,256M --methods 'qr_*' --codecs fp8,int4,int4h,int6 --iters 2 --replays 3 --timeout 75 --csv $OUT/check-$v.csv > /tmp/check.log 2>&1
  echo "bench check $v: exit $? [$SECONDS s]"; grep -iE "error|fail|mismatch|not identical" /tmp/check.log | head -5
  python3 -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(len(r), 'rows; identical:', sorted({x['identical'] for x in r}), 'max rel_err by codec:', {m: max(float(x['rel_err']) for x in r if x['method']==m) for m in sorted({x['method'] for x in r})})" $OUT/check-$v.csv
done
for r in 1 2; do
  for v in wide twoup-c2 twoup-c3; do
    use ${v%-c*}-ext > /dev/null
    c=3; [ $v = twoup-c2 ] && c=2
    QR_DEV_EXCHANGE_CTAS=$c DEV_SIZES=2,8,32,64,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 \
      timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/dev-exchange.log
  done
done
python3 - $OUT/dev-exchange.log <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "kind": head = f[2:]; continue
    for col, x in zip(head, f[3:]): t[(f[1], int(f[2]), col)][f[0]].append(float(x))
vs = ["wide", "twoup-c2", "twoup-c3"]
for key, runs in sorted(t.items()):
    if key[2] == "nccl": continue
    best = {v: min(runs[v]) for v in vs if runs[v]}
    print(f"{key[0]:4s} {key[1]:>10d} {key[2]:9s} " + "  ".join(f"{v} " + "/".join(f"{x:.2f}" for x in runs[v]) for v in vs)
          + "   c2/wide %.3f c3/wide %.3f" % (best["twoup-c2"] / best["wide"], best["twoup-c3"] / best["wide"]))
PY
