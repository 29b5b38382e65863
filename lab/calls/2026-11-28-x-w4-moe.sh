#!/usr/bin/env bash
# 4 GPUs (asked nvidia-h100-x4, 2026-11-28): the a2a part with --iters samples (20) of a 20-call graph, dynamic and
# host-sized in turns (call v: 10 samples in turns, 8 KB even 1.03-1.11 over three runs on 2x H100): the a2a part
# once, then the whole `bench moe` (--iters 20) for
# results/<machine>/moe.csv. Carry .wheels/pair-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use pair-ext > /dev/null
for i in 1; do
  timeout 60 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part a2a --iters 20 --timeout 55 --csv $OUT/a2a-$i.csv > $OUT/a2a-$i.log 2>&1
  echo "a2a $i: exit $? [$SECONDS s]"
done
timeout 200 python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --tokens 1,32,256,4096,16384 --iters 20 --timeout 195 \
  --csv $OUT/moe.csv > $OUT/moe.log 2>&1
echo "moe W=4: exit $? [$SECONDS s]"
python3 - $OUT/a2a-1.csv $OUT/moe.csv <<'PY'
import csv, sys
runs = [{(r["bytes"], r["skew"]): r for r in csv.DictReader(open(f)) if r["part"] == "a2a"} for f in sys.argv[1:]]
for k in runs[0]:
    print(f"{int(k[0]):>10d} {k[1]:6s} " + "   ".join(f"{r[k]['dynamic_us']}/{r[k]['host_sized_us']} = {r[k]['ratio']}" for r in runs))
PY
grep -E "uniform  (qr_graph |nccl)|16384.*(qr_graph |nccl)" $OUT/moe.log
