#!/usr/bin/env bash
# Session-16 A/B of the lab/wip patches on 2 GPUs (one device call): for each variant, its extension
# (carried wheel) + its patch applied to this copy, its GPU tests, then the timings it is about.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/ab-logs.log
use() {  # use VARIANT [PATCH]: the variant's extension and Python/tests
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/$1/*.whl
  [ -n "${2:-}" ] && git apply lab/wip/$2.patch
  echo "===== variant $1" | tee -a $L
}
unuse() { git apply -R lab/wip/$1.patch; }
qb() { timeout 150 python3 -m quickreduce.cli bench --timeout 140 --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> $L; }
ar_int4() { qb --sizes 64M:1G:4 --methods qr_int4,qr_int4h --csv $OUT/ar-int4-$1.csv; }
epi() { for h in 4096 8192; do qb --epilogue add_rmsnorm --hidden $h --sizes 8K:1M:2 --methods qr_auto,qr_one_shot,qr_fused_lossless,qr_unfused_lossless --csv $OUT/epi-h$h-$1.csv; done; }
rs() { qb --collective reduce_scatter --sizes 512K:32M:2 --methods qr_lossless,qr_passthrough,symm_mem,nccl --csv $OUT/rs-$1.csv; }
speed() { timeout 60 python3 -m quickreduce.cli codec-speed --csv $OUT/codec-speed-$1.csv >> $L 2>&1; }
t() { timeout 200 python3 -m pytest -q -s -p no:cacheprovider "$@" >> $L 2>&1; echo "tests $*: $(tail -1 $L)"; }

use main; speed main; ar_int4 main; epi main; rs main
use int4h-bf16-transform int4h-bf16-transform
t tests/gpu/test_codec_speed_gpu.py
QR_TEST_SCENARIOS=codecs_vs_twin,codec_edge_values,collectives_vs_twin t tests/gpu/test_dist.py tests/gpu/test_collectives.py
speed bf16; ar_int4 bf16; unuse int4h-bf16-transform
use fused-one-shot-add-rmsnorm fused-one-shot-add-rmsnorm
t tests/gpu/test_epilogue_gpu.py
epi fused; unuse fused-one-shot-add-rmsnorm
use packets-2mb packets-2mb
QR_TEST_SCENARIOS=small_segments,collectives_vs_twin t tests/gpu/test_collectives.py
rs packets; unuse packets-2mb
grep -E "^=====|tests |int4|codec|fused|one_shot|qr_auto|lossless|passthrough|symm|nccl" $L | tail -150
