#!/usr/bin/env bash
# Session 19 call 10 (2 GPUs): wheel `wpre` = HEAD + the norm-only epilogue kernel loading the weights
# before its grid-dependency wait (r after it). The add-in-two-shot route forced at every size
# (two_shot_residual_min_bytes = 0, patched in for this run) against the two kernels
# (QUICKREDUCE_FUSED_EPILOGUE=0), 1-16 MB, to see where the threshold should be.
set -uo pipefail
DEVICE_LOG=call10.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a $L
use wpre
sed -i 's/self.two_shot_residual_min_bytes = 8 << 20/self.two_shot_residual_min_bytes = 0/' python/quickreduce/comm.py
QR_TEST_SCENARIOS=epilogue_vs_oracle,epilogue_fp8 timeout 120 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py > $OUT/tests.log 2>&1
echo "epilogue tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests.log | head -4
E="--epilogue add_rmsnorm --hidden 4096"
for r in 1 2; do for f in 1 0; do
  export QUICKREDUCE_FUSED_EPILOGUE=$f
  qb $E --sizes 1M:16M:2 --methods qr_fused_int4,qr_fused_fp8 --csv /tmp/e.csv
  [ -f $OUT/epilogue.csv ] || sed -n 1p /tmp/e.csv | sed 's/^/fused_env,/' > $OUT/epilogue.csv
  sed 1d /tmp/e.csv | sed "s/^/$f-$r,/" >> $OUT/epilogue.csv
done; done
unset QUICKREDUCE_FUSED_EPILOGUE
git checkout python/quickreduce/comm.py 2>/dev/null || sed -i 's/self.two_shot_residual_min_bytes = 0/self.two_shot_residual_min_bytes = 8 << 20/' python/quickreduce/comm.py
python3 - $OUT/epilogue.csv <<'PY'
import csv, sys, collections
d = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    d[(r["method"], int(r["size_bytes"]))].append((r["fused_env"], float(r["time_us"]), r["identical"]))
for (m, s), v in sorted(d.items()):
    print(f"{m:18s} {s:>9d} " + "  ".join(f"{a}:{t:8.2f}" for a, t, _ in v), {i for *_, i in v})
PY
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
