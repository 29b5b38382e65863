#!/usr/bin/env bash
# Session-17 call 6 (2 GPUs): the landed tree (fused one-shot + add + RMSNorm with the st.async row
# exchange, at most 256 KiB), wheel `land`: every GPU test on 2 GPUs, the sanitizers over the
# epilogue, the A/B against the two-kernel path (QUICKREDUCE_FUSED_EPILOGUE=0) beside the plain
# one-shot and FlashInfer's fused op, then the fused scenario at W = 4 and 8 on one shared GPU.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/call6.log
qb() { timeout 50 python3 -m quickreduce.cli bench --timeout 45 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; echo "bench $*: exit ${PIPESTATUS[0]}"; }
SECONDS=0
rm -f python/quickreduce/_C*.so
python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/land/*.whl
timeout 280 python3 -m pytest -q -s -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1
echo "tests/gpu on 2 GPUs: exit $?: $(tail -1 $OUT/gpu_tests.log) [$SECONDS s]"
grep -E "failed|FAILED|Error" $OUT/gpu_tests.log | grep -v " 0 failed" | head -10
QR_SANITIZE_SHORT=1 QR_SANITIZE_PARTS=epilogue TOOLS="memcheck racecheck synccheck" SANITIZE_TIMEOUT_S=60 \
  bash scripts/gpu_check.sh sanitize 2>&1 | grep -vE "^name|^NVIDIA" | tee -a $L
echo "[$SECONDS s]"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
E="--sizes 8K:1M:2 --epilogue add_rmsnorm"
qb --sizes 8K:1M:2 --methods qr_one_shot --csv $OUT/plain.csv
for h in 4096 8192; do
  qb $E --hidden $h --methods qr_fused_lossless,trtllm_fused --csv $OUT/epi-h$h.csv
  QUICKREDUCE_FUSED_EPILOGUE=0 qb $E --hidden $h --methods qr_fused_lossless --csv $OUT/epi-h$h-twokernel.csv
done
echo "[$SECONDS s]"
for w in 4 8; do
  QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$w QR_TEST_SCENARIOS=epilogue_fused_one_shot QR_EPILOGUE_REPLAYS=50 \
    timeout 60 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py >> $L 2>&1
  echo "fused scenario W=$w shared: exit $?: $(tail -1 $L) [$SECONDS s]"
done
grep -E "qr_fused|trtllm_fused|qr_one_shot" $L | grep -vE "┃" | tail -50
bash scripts/gpu_check.sh fold > /dev/null
