#!/usr/bin/env bash
# Session-17 call 2 (2x H100), tree with lab/wip/fused-cluster-one-shot.patch applied: where the fused
# one-shot's extra time goes. `fmodes` = the patch + a lab switch QR_FUSED_MODE (0 full; 1 no norm;
# 2 no norm, no cluster launch; 3 the plain store, no cluster launch), beside the plain one-shot.
# Then ncu on the int4 and int4h encodes (issue 30), logs folded into one file.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call2.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 120 python3 -m quickreduce.cli bench --timeout 110 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit $?"; }
SECONDS=0
use fmodes
S="--sizes 8K:1M:2"
qb $S --methods qr_one_shot,qr_auto --csv /tmp/plain.csv
for m in 0 1 2 3; do
  QR_FUSED_MODE=$m qb $S --epilogue add_rmsnorm --hidden 4096 --methods qr_fused_lossless --csv /tmp/mode$m.csv
done
qb $S --methods qr_one_shot,qr_auto --csv /tmp/plain2.csv
QR_FUSED_MODE=0 qb $S --epilogue add_rmsnorm --hidden 1024 --methods qr_fused_lossless --csv /tmp/mode0-h1024.csv
QR_FUSED_MODE=0 qb $S --epilogue add_rmsnorm --hidden 16384 --methods qr_fused_lossless --csv /tmp/mode0-h16384.csv
python3 - <<'PY' > $OUT/modes.csv
import csv, sys
w = None
for tag in ("plain", "mode0", "mode1", "mode2", "mode3", "plain2", "mode0-h1024", "mode0-h16384"):
    for r in csv.DictReader(open(f"/tmp/{tag}.csv")):
        r = {"variant": tag, **r}
        if w is None:
            w = csv.DictWriter(sys.stdout, fieldnames=list(r)); w.writeheader()
        w.writerow(r)
PY
echo "[$SECONDS s]"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in int4 int4h; do
  timeout 90 "$NCU" --clock-control none --set full -k regex:encode_kernel -c 1 -f -o /tmp/enc-$c \
    python3 -m quickreduce.cli codec-speed --codecs $c --numel 64M --calls 1 --replays 1 > $OUT/ncu-$c-run.log 2>&1
  echo "ncu $c: exit $?"
  "$NCU" -i /tmp/enc-$c.ncu-rep --page details > $OUT/ncu-$c-details.log 2>&1
  "$NCU" -i /tmp/enc-$c.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$c-source.csv 2>&1
  "$NCU" -i /tmp/enc-$c.ncu-rep --page raw --csv > $OUT/ncu-$c-raw.csv 2>&1
done
echo "[$SECONDS s]"
grep -E "^=====|qr_" $L | grep -vE "┃" | tail -80
bash scripts/gpu_check.sh fold > /dev/null
ls -la $OUT
