#!/usr/bin/env bash
# Session-17 call 5 (2 GPUs), tree with lab/wip/fused-cluster-one-shot.patch applied. fmodesD = fmodesC
# + lab modes 4 (the CTA's own sum only: no cluster exchange; right at hidden 1024 only), 5 (4 + a
# relaxed cluster barrier round) and 6 (the CTAs' sums by st.async onto each CTA's mbarrier: no
# release, no cluster barrier after the start). Mode 6's bits checked by the epilogue tests first.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call5.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 50 python3 -m quickreduce.cli bench --timeout 45 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit ${PIPESTATUS[0]}"; }
SECONDS=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
use fmodesD
QR_FUSED_MODE=6 timeout 60 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py >> $L 2>&1
echo "epilogue tests, mode 6: exit $?: $(tail -1 $L)"
S="--sizes 8K:1M:2"
E="$S --epilogue add_rmsnorm"
qb $S --methods qr_one_shot --csv /tmp/plain.csv
for m in 1 4 5 0 6; do
  QR_FUSED_MODE=$m qb $E --hidden 4096 --methods qr_fused_lossless --csv /tmp/mode$m.csv
done
QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden 4096 --methods qr_fused_lossless --csv /tmp/twokernel.csv
qb $S --methods qr_one_shot --csv /tmp/plain2.csv
for h in 1024 8192 16384; do
  QR_FUSED_MODE=6 qb $E --hidden $h --methods qr_fused_lossless,trtllm_fused --csv /tmp/mode6-h$h.csv
done
python3 - <<'PY' > $OUT/modes.csv
import csv, os, sys
w = None
for tag in ("plain", "mode1", "mode4", "mode5", "mode0", "mode6", "twokernel", "plain2", "mode6-h1024", "mode6-h8192", "mode6-h16384"):
    if not os.path.exists(f"/tmp/{tag}.csv"):
        continue
    for r in csv.DictReader(open(f"/tmp/{tag}.csv")):
        r = {"variant": tag, **r}
        if w is None:
            w = csv.DictWriter(sys.stdout, fieldnames=list(r)); w.writeheader()
        w.writerow(r)
PY
echo "[$SECONDS s]"
bash scripts/gpu_check.sh fold > /dev/null
