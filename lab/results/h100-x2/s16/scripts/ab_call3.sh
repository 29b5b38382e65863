#!/usr/bin/env bash
# Session-16 call 3 (2 GPUs): the landed tree (land) under memcheck/racecheck and timed; the rotated
# two-shot at 3 CTAs an SM (rot3) checked and timed beside it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/ab-logs.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 150 python3 -m quickreduce.cli bench --timeout 140 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; }
ar() { qb --sizes 64M:1G:4 --methods qr_int4,qr_int4h,qr_int6,qr_int6h --csv $OUT/ar-$1.csv; }
t() { timeout 200 python3 -m pytest -q -s -p no:cacheprovider "$@" >> $L 2>&1; echo "tests $*: $(tail -1 $L)"; }

use land
timeout 60 python3 -m quickreduce.cli codec-speed --csv $OUT/codec-speed-land.csv >> $L 2>&1; grep -E "int4|int6" $OUT/codec-speed-land.csv
QR_SANITIZE_SHORT=1 TOOLS="memcheck racecheck" SANITIZE_TIMEOUT_S=150 bash scripts/gpu_check.sh sanitize
ar land
use rot3
QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values t tests/gpu/test_dist.py
ar rot3
use land
qb --collective reduce_scatter,all_gather,all_to_all --sizes 512K:16M:2 --methods nccl,symm_mem,qr_lossless --csv $OUT/family-land.csv
timeout 100 python3 -m quickreduce.cli bench --shared-gpu --epilogue add_rmsnorm --sizes 8K:1M:8 --csv /tmp/epi-shared-gpu.csv >> $L 2>&1; echo "shared-gpu epilogue bench: exit $?"
qb --epilogue add_rmsnorm --hidden 8192 --sizes 512K:8M:2 --methods qr_auto,qr_fused_lossless,qr_unfused_lossless --csv $OUT/epi-h8192-land.csv
grep -E "^=====|^tests |passed|qr_int|│" $L | grep -vE "┃" | tail -60
