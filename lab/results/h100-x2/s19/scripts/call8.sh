#!/usr/bin/env bash
# Session 19 call 8 (2 GPUs): wheel `resid` = the two-shot adds the epilogue's residual at its stores
# (kResidual kernels) and the epilogue kernel after it only normalises (4 bytes a value less). Its
# checks (epilogue tests, codecs_vs_twin, memcheck over the epilogue), then fused (=1: the new path)
# against two kernels (=0) alternated, hidden 4096, 1M-64M. Predicted from call 1's two-kernel rows
# (int4 32M 73.0 us = 41 all-reduce + 32 epilogue at ~4 TB/s for 8 B a value): the epilogue kernel
# ~half (4 B a value), the two-shot +2-4 us (a residual load a lane): ~-15% at 16-64 MB.
set -uo pipefail
DEVICE_LOG=call8.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use resid
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/tests.log 2>&1
echo "epilogue tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests.log | head -8
QR_TEST_SCENARIOS=codecs_vs_twin,graph_replays timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_dist.py >> $OUT/tests.log 2>&1
echo "codecs tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"
E="--epilogue add_rmsnorm --hidden 4096"
for r in 1 2; do for f in 1 0; do
  export QUICKREDUCE_FUSED_EPILOGUE=$f
  qb $E --sizes 1M:64M:4 --methods qr_fused_int4,qr_fused_lossless,qr_fused_fp8 --csv /tmp/e.csv
  [ -f $OUT/epilogue.csv ] || sed -n 1p /tmp/e.csv | sed 's/^/fused_env,/' > $OUT/epilogue.csv
  sed 1d /tmp/e.csv | sed "s/^/$f-$r,/" >> $OUT/epilogue.csv
done; done
unset QUICKREDUCE_FUSED_EPILOGUE
echo "[$SECONDS s]"
python3 - $OUT/epilogue.csv <<'PY'
import csv, sys, collections
d = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    d[(r["method"], int(r["size_bytes"]))].append((r["fused_env"], float(r["time_us"]), r["identical"]))
for (m, s), v in sorted(d.items()):
    print(f"{m:18s} {s:>9d} " + "  ".join(f"{a}:{t:8.2f}" for a, t, _ in v), {i for *_, i in v})
PY
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS=memcheck SANITIZE_TIMEOUT_S=150 bash scripts/gpu_check.sh sanitize
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
