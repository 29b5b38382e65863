#!/usr/bin/env bash
# 2x H200. The slice exchange at three CTAs of 256 threads... per SM pair: __launch_bounds__(512, 3) (40 registers,
# 24-92 bytes of spills) against main's (512, 2) (52-64 registers, no spills): 6 CTAs of 256 threads an SM where 4 ran.
# Call bd's laps: at 128 / 512 MB every CTA spends its time in push (encode + staging) and decode, about half each,
# waiting ~1% on flags: HBM latency with one 16-byte load in flight a thread, not the link. The two-shot all-reduce
# runs 2048 threads an SM (4 CTAs of 512 at 32 registers) and its int4 512 MB takes 484 us for more work than the
# 440 us reduce-scatter. Expectation: the family's codecs at 32-512 MB 5-15% faster at 3; small sizes even.
# Wheel occ-ext: main + a template CTAs-an-SM argument, QR_DEV_EXCHANGE_CTAS=3 picks it (2 = main's code).
# Carry .wheels/occ-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use occ-ext > /dev/null
QR_DEV_EXCHANGE_CTAS=3 QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,uneven_all_to_all \
  timeout 100 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-occ3.log 2>&1
echo "tests occ3: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-occ3.log | tail -4
for dt in bf16 fp32; do
  codecs=fp16,fp8,int4,int4h; [ $dt = fp32 ] && codecs=fp16,fp8,int4
  for v in 2 3 2 3; do
    QR_DEV_EXCHANGE_CTAS=$v DEV_DTYPE=$dt DEV_SIZES=2,8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=$codecs DEV_THREADS=0 \
      timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt ctas=$v: exit $? [$SECONDS s]"; sed "s/^/$dt c$v /" /tmp/dx.log >> $OUT/dev-exchange.log
  done
done
python3 - $OUT/dev-exchange.log <<'PY'
import collections, sys
t = collections.defaultdict(list); head = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[2] == "kind": head[f[0]] = f[3:]; continue
    for col, x in zip(head[f[0]], f[4:]): t[(f[0], f[2], int(f[3]), col)].append((f[1], float(x)))
for (dt, kind, size, col), runs in sorted(t.items()):
    c2 = [x for v, x in runs if v == "c2"]; c3 = [x for v, x in runs if v == "c3"]
    if col == "nccl": continue
    print(f"{dt} {kind:4s} {size:>10d} {col:10s} c2 " + " ".join(f"{x:8.2f}" for x in c2) + "  c3 " + " ".join(f"{x:8.2f}" for x in c3)
          + f"   c3/c2 {min(c3) / min(c2):.3f}")
PY
