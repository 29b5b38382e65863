#!/usr/bin/env bash
# Ready for the next session, 2 or 4 GPUs: do the coded small path's occasional slow points recur for the
# same codec and size, or move with time? (Seen once each: A2A fp4 8 KB 12.7 us, RS fp8 128 KB 23.2, AG fp4
# 32 KB 12.4, where the neighbours took 3-7; several methods at one size were slow together in the last.)
# Three sweeps of the same sizes, 21 replays each, every codec; per-replay spread from the CSV's time_us
# only (the bench keeps the median), so also a --replays 3 sweep to see single replays.
# Build first: WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh main && bash lab/scripts/engine_gpu_check.sh pack main
# Carry .wheels/main-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
use main-ext > /dev/null
gpus=$(nvidia-smi -L | wc -l)
for i in 1 2 3; do
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods 'qr_*' --sizes 8K,32K,128K,512K --replays 21 --timeout 55 --csv $OUT/sweep-$i.csv > /tmp/s.log 2>&1
  echo "sweep $i: exit $?"; cat /tmp/s.log >> $L
done
python3 - $OUT/sweep-*.csv <<'PY'
import collections, csv, sys
t = collections.defaultdict(list)
for f in sys.argv[1:]:
    for r in csv.DictReader(open(f)):
        t[(r["collective"], r["method"], int(r["size_bytes"]))].append(float(r["time_us"]))
for k, v in sorted(t.items()):
    if max(v) > 1.5 * min(v): print(*k, v)
PY
