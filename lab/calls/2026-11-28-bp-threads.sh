#!/usr/bin/env bash
# 2x H200. main-ext = main at d57d65b. The exchange's CTA size on 2 GPUs: the rule's 256 against 128 threads, every
# kind, bf16 and fp32, 8-512 MB, twice (call bo: fp32 all-gather / all-to-all at 512 MB 4-8% faster at 128).
# Expectation: 128 faster for fp32 ag / a2a at 128-512 MB (more CTAs an SM: more barriers in flight), bf16 even or
# slower (its two slices a step already keep two loads in flight).
# Carry .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use main-ext > /dev/null
for r in 1 2; do
  for dt in fp32 bf16; do
    DEV_DTYPE=$dt DEV_SIZES=8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=256,128 \
      timeout 100 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "threads $dt round $r: exit $? [$SECONDS s]"; sed "s/^/$dt r$r /" /tmp/dx.log >> $OUT/threads.log
  done
done
python3 - $OUT/threads.log <<'PY'
import collections, sys
t = collections.defaultdict(list); heads = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4: continue
    if f[2] == "kind": heads[f[0]] = f[4:]; continue
    for col, x in zip(heads[f[0]], f[4:]): t[(f[0], f[2], int(f[3]), col)].append(float(x))
for (dt, kind, size, col), xs in sorted(t.items()):
    if not col.endswith("_t256"): continue
    c128 = t[(dt, kind, size, col[:-3] + "128")]
    print(f"{dt} {kind:4s} {size:>10d} {col[:-5]:6s} t256 " + "/".join(f"{x:.2f}" for x in xs) + "  t128 "
          + "/".join(f"{x:.2f}" for x in c128) + f"   t128/t256 {min(c128) / min(xs):.3f}")
PY
