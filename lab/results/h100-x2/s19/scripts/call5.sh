#!/usr/bin/env bash
# Session 19 call 5 (2 GPUs): wheel `cta2g` = final + the W = 2 two-shot kernel of any CTA size (the one
# below ~4.3 MB) bounded to 2 CTAs an SM (lossless 40 regs + 72 B stack -> 56, int4h 40 -> 54, int4
# 32 + 8 B -> 46). Predicted from session 18 call 6 (all kernels at 2 an SM): lossless -14% and int4h
# -9% at 4 MB, int4 -1%; nothing from 8 MB (the 512-thread kernel is untouched). final / cta2g twice.
set -uo pipefail
DEVICE_LOG=call5.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use cta2g
QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values,graph_replays timeout 150 python3 -m pytest -q -s -p no:cacheprovider \
  tests/gpu/test_dist.py > $OUT/tests.log 2>&1
echo "tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests.log | head -4
for v in final cta2g final cta2g; do
  use $v; qb --sizes 512K:16M:2 --methods qr_two_shot,qr_lossless,qr_int4h,qr_int4,qr_fp8,qr_int6h --csv /tmp/ar.csv
  [ -f $OUT/ab.csv ] || sed -n 1p /tmp/ar.csv | sed 's/^/variant,/' > $OUT/ab.csv
  sed 1d /tmp/ar.csv | sed "s/^/$v,/" >> $OUT/ab.csv
done
echo "[$SECONDS s]"
python3 - $OUT/ab.csv <<'PY'
import csv, sys, collections
d = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    d[(r["method"], int(r["size_bytes"]))].append((r["variant"], float(r["time_us"]), r["identical"], r["rel_err"]))
for (m, s), v in sorted(d.items()):
    print(f"{m:14s} {s:>9d} " + "  ".join(f"{a}:{t:8.2f}" for a, t, _, _ in v), "ok" if all(i in ("True", "yes", "n/a", "None") for _, _, i, _ in v) else [i for *_, i, _ in v])
PY
bash scripts/gpu_check.sh fold > /dev/null
