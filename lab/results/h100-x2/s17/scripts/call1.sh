#!/usr/bin/env bash
# Session-17 call 1 (2x H100), run with lab/wip/fused-cluster-one-shot.patch applied to the tree and
# its wheel's extension (`fused`): the fused epilogue's GPU tests, its A/B against the two-kernel path
# (QUICKREDUCE_FUSED_EPILOGUE=0) beside the plain all-reduce and FlashInfer's fused op, the
# sanitizers over the epilogue, then ncu on the int4 and int4h encodes (issue 30).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call1.log
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  echo "===== variant $1" | tee -a $L
}
qb() { timeout 120 python3 -m quickreduce.cli bench --timeout 110 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit $?"; }
t() { timeout 200 python3 -m pytest -q -s -p no:cacheprovider "$@" >> $L 2>&1; echo "tests $*: $(tail -1 $L)"; }
SECONDS=0
use fused
t tests/gpu/test_epilogue_gpu.py
echo "[$SECONDS s]"
# FlashInfer for trtllm_fused / trtllm_one_shot_pdl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
E="--epilogue add_rmsnorm --sizes 8K:1M:2"
for h in 4096 8192; do
  qb --sizes 8K:1M:2 --methods qr_lossless,trtllm_one_shot_pdl --csv $OUT/ar-h$h.csv
  QUICKREDUCE_FUSED_EPILOGUE=1 qb $E --hidden $h --methods qr_fused_lossless,trtllm_fused,nccl_unfused --csv $OUT/epi-h$h-fused.csv
  QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden $h --methods qr_fused_lossless,qr_unfused_lossless --csv $OUT/epi-h$h-twokernel.csv
  QUICKREDUCE_FUSED_EPILOGUE=1 qb $E --hidden $h --methods qr_fused_lossless --csv $OUT/epi-h$h-fused2.csv
  echo "[$SECONDS s]"
done
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck racecheck synccheck" SANITIZE_TIMEOUT_S=80 \
  bash scripts/gpu_check.sh sanitize 2>&1 | tee -a $L
echo "[$SECONDS s]"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in int4 int4h; do
  timeout 90 "$NCU" --clock-control none --set full -k regex:encode_kernel -c 1 -f -o /tmp/enc-$c \
    python3 -m quickreduce.cli codec-speed --codecs $c --numel 64M --calls 1 --replays 1 >> $L 2>&1
  echo "ncu $c: exit $?"
  "$NCU" -i /tmp/enc-$c.ncu-rep --page details > $OUT/ncu-$c-details.log 2>&1
  "$NCU" -i /tmp/enc-$c.ncu-rep --page source --csv --print-source sass > /tmp/ncu-$c-source.csv 2>&1
done
cat /tmp/ncu-int4-source.csv > $OUT/ncu-source.csv; echo "=====int4h" >> $OUT/ncu-source.csv; cat /tmp/ncu-int4h-source.csv >> $OUT/ncu-source.csv
echo "[$SECONDS s]"
grep -E "^=====|^tests |passed|failed|qr_|trtllm|nccl_" $L | grep -vE "┃" | tail -90
