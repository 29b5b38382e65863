#!/usr/bin/env bash
# Session-17 call 3 (2x H100), tree with lab/wip/fused-cluster-one-shot.patch applied: where the fused
# one-shot's extra time goes. `fmodes` = the patch + a lab switch QR_FUSED_MODE (0 full; 1 no norm;
# 2 no norm, no cluster launch; 3 the plain store, no cluster launch), beside the plain one-shot.
# fmodesB: the DSMEM sum sent by a control lane that never stores over NVLink, which alone arrives
# with release semantics (cluster.sync() put a MEMBAR.ALL.GPU in every thread); the weight index
# from %cluster_ctarank (no 64-bit division before the push). Epilogue GPU tests with it first.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call3.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 120 python3 -m quickreduce.cli bench --timeout 110 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit $?"; }
SECONDS=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
use fmodesB
S="--sizes 8K:1M:2"
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py >> $L 2>&1; echo "tests: $(tail -1 $L)"
qb $S --methods qr_one_shot --csv /tmp/plain.csv
for m in 0 1 3; do
  QR_FUSED_MODE=$m qb $S --epilogue add_rmsnorm --hidden 4096 --methods qr_fused_lossless --csv /tmp/mode$m.csv
done
qb $S --methods qr_one_shot --csv /tmp/plain2.csv
for h in 1024 8192 16384; do
  qb $S --epilogue add_rmsnorm --hidden $h --methods qr_fused_lossless,trtllm_fused --csv /tmp/mode0-h$h.csv
done
python3 - <<'PY' > $OUT/modes.csv
import csv, sys
w = None
for tag in ("plain", "mode0", "mode1", "mode3", "plain2", "mode0-h1024", "mode0-h8192", "mode0-h16384"):
    for r in csv.DictReader(open(f"/tmp/{tag}.csv")):
        r = {"variant": tag, **r}
        if w is None:
            w = csv.DictWriter(sys.stdout, fieldnames=list(r)); w.writeheader()
        w.writerow(r)
PY
echo "[$SECONDS s]"
echo "[$SECONDS s]"
grep -E "^=====|qr_" $L | grep -vE "┃" | tail -80
bash scripts/gpu_check.sh fold > /dev/null
ls -la $OUT
