#!/usr/bin/env bash
# Session-17 call 4 (2 GPUs), tree with lab/wip/fused-cluster-one-shot.patch applied. fmodesC = the
# patch + QR_FUSED_MODE (lab switch: 0 full, 1 no norm, 3 the plain store) + the control warp alone
# sending the DSMEM sum and arriving with release semantics, converged (fmodesB's divergent arrive in
# one warp hung in call 3); the weight index from %cluster_ctarank. Epilogue GPU tests first (a hang
# stops the call), then the A/B beside the plain one-shot and FlashInfer's fused op, then the
# sanitizers over the epilogue.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call4.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 60 python3 -m quickreduce.cli bench --timeout 50 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit ${PIPESTATUS[0]}"; }
SECONDS=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
use fmodesC
timeout 90 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py >> $L 2>&1
rc=$?; echo "epilogue tests: exit $rc: $(tail -1 $L)"
[ $rc = 0 ] || { grep -E "failed|FAIL|Error" $L | head -20; exit 1; }
S="--sizes 8K:1M:2"
qb $S --methods qr_one_shot --csv /tmp/plain.csv
for m in 0 1; do
  QR_FUSED_MODE=$m qb $S --epilogue add_rmsnorm --hidden 4096 --methods qr_fused_lossless --csv /tmp/mode$m.csv
done
qb $S --methods qr_one_shot --csv /tmp/plain2.csv
for h in 1024 4096 8192 16384; do
  qb $S --epilogue add_rmsnorm --hidden $h --methods qr_fused_lossless,trtllm_fused --csv /tmp/mode0-h$h.csv
done
python3 - <<'PY' > $OUT/modes.csv
import csv, os, sys
w = None
for tag in ("plain", "mode0", "mode1", "plain2", "mode0-h1024", "mode0-h4096", "mode0-h8192", "mode0-h16384"):
    if not os.path.exists(f"/tmp/{tag}.csv"):
        continue
    for r in csv.DictReader(open(f"/tmp/{tag}.csv")):
        r = {"variant": tag, **r}
        if w is None:
            w = csv.DictWriter(sys.stdout, fieldnames=list(r)); w.writeheader()
        w.writerow(r)
PY
echo "[$SECONDS s]"
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck racecheck synccheck" SANITIZE_TIMEOUT_S=60 \
  bash scripts/gpu_check.sh sanitize 2>&1 | tee -a $L
echo "[$SECONDS s]"
grep -E "^=====|qr_|trtllm" $L | grep -vE "┃" | tail -70
bash scripts/gpu_check.sh fold > /dev/null
