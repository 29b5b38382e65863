#!/usr/bin/env bash
# 4x H100 (2026-11-28): is 512-thread CTAs' 3-6 us at 32 KB-2 MB a back-to-back cost (PDL: the next call's
# 512-thread CTAs cannot sit beside the running call's, whose two CTAs an SM fill the register file)? The a2a part
# with QUICKREDUCE_PDL=0, main against a2aw, A B A B; then what a user sees: the MoE layer (one dynamic dispatch and
# combine among other kernels), main against a2aw, A B A B, 32-16384 tokens.
# Expectation: with PDL off the small-size gap shrinks to <1 us; the layer equal at 32-256 tokens, 2-5% faster at 16384.
# Carry .wheels/main-ext, .wheels/a2aw-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
for v in main a2aw main a2aw; do
  use $v-ext > /dev/null
  QUICKREDUCE_PDL=0 timeout 45 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part a2a --iters 20 --timeout 40 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a nopdl $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-nopdl-ab.csv; cat /tmp/a2a.log >> $L
done
ab_a2a $OUT/a2a-nopdl-ab.csv main a2aw
for v in main a2aw main a2aw; do
  use $v-ext > /dev/null
  timeout 80 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part layer --tokens 32,256,4096,16384 --iters 10 --timeout 75 \
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
for k, d in sorted(t.items()): print(*k, *(f"{v} " + " ".join(d[v]) for v in ("main", "a2aw")))
PY
