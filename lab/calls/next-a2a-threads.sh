#!/usr/bin/env bash
# Ready for the next session, 2 or 4 GPUs: 512-thread CTAs for the uneven and dynamic all-to-all (wheel a2a512:
# exchange_threads returns 512 for all-to-all; main: 256). lab/probes/a2a_skew.py found 512 threads 3-10% faster
# at >= 29 MB a rank for every pattern and equal at 7 MB (4x H100 and 4x H200, 2026-11-27); the small sizes
# (MoE decode) were never timed at 512. A B A B: `bench moe --part a2a` (8 KB-256 MB, dynamic and host-sized),
# then the MoE layer at 1-4096 tokens on each. Take 512 only if no size gets slower.
# Both wheels were built on 2026-11-27 from main at the session's end (.wheels/main-ext, .wheels/a2a512-ext);
# rebuild them if main's C++ moved since. Carry both.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
for v in main a2a512 main a2a512; do
  use $v-ext > /dev/null
  timeout 45 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part a2a --iters 20 --timeout 40 --csv /tmp/a2a.csv > /tmp/a2a.log 2>&1
  echo "a2a $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/a2a.csv >> $OUT/a2a-ab.csv
done
ab_a2a $OUT/a2a-ab.csv main a2a512
for v in main a2a512; do
  use $v-ext > /dev/null
  timeout 150 python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --part layer --tokens 1,32,256,4096 --iters 10 --timeout 145 \
    --csv $OUT/moe-$v.csv > /tmp/moe.log 2>&1
  echo "moe layer $v: exit $? [$SECONDS s]"; cat /tmp/moe.log >> $L
done
