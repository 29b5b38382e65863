#!/usr/bin/env bash
# 2x H200, warm after bh. g2-ext = final + twice the pipeline groups for every scaled codec (fp8 / int8 have had it
# since 4x H100 measured them 5-15% faster; int4 / fp4 / int6 and the rotated ones group by their bytes). Call bf:
# int4 is slower than fp8 at 512 MB (rs 378 vs 319 us) though it moves half the bytes.
# Expectation: int4 / fp4 / int6 / int4h 3-10% faster at 128-512 MB, fp8 / passthrough unchanged.
# Carry .wheels/final-ext .wheels/g2-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use g2-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin timeout 80 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-g2.log 2>&1
echo "tests g2: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-g2.log | tail -2
for v in final g2 final g2; do
  use $v-ext > /dev/null
  DEV_SIZES=32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp8,int6,int4,fp4,int4h DEV_THREADS=0 timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/dev-exchange.log
done
python3 - $OUT/dev-exchange.log <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "kind": head = f[2:]; continue
    for col, x in zip(head, f[3:]): t[(f[1], int(f[2]), col)][f[0]].append(float(x))
for key, runs in sorted(t.items()):
    print(f"{key[0]:4s} {key[1]:>10d} {key[2]:9s} final " + "/".join(f"{x:.2f}" for x in runs["final"]) + "  g2 "
          + "/".join(f"{x:.2f}" for x in runs["g2"]) + "   g2/final %.3f" % (min(runs["g2"]) / min(runs["final"])))
PY
