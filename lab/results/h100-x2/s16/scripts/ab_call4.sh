#!/usr/bin/env bash
# Session-16 call 4 (2 GPUs): codec-speed with two lanes in flight (lanes2) beside one (land); the
# family at 4-32 MB before (pre, 9d5befe) and after (lanes2) the 2 MiB packets, alternated.
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
speed() { timeout 60 python3 -m quickreduce.cli codec-speed --csv $OUT/codec-speed-$1.csv >> $L 2>&1; cut -d, -f1,5,6,7,11 $OUT/codec-speed-$1.csv; }
fam() { qb --collective reduce_scatter,all_gather,all_to_all --sizes 4M:32M:2 --methods qr_lossless,nccl --csv /tmp/family-$1.csv; sed 1d /tmp/family-$1.csv | sed "s/^/$1,/" >> $OUT/family-ab.csv; }

use land; speed land
use lanes2; speed lanes2
timeout 100 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_codec_speed_gpu.py >> $L 2>&1; echo "codec_speed tests: $(tail -1 $L)"
use land; speed land2
use pre; fam pre1
use lanes2; fam post1
use pre; fam pre2
use lanes2; fam post2
awk -F, '$5 == "qr_lossless" {print $NF, $2, $1, $6}' $OUT/family-ab.csv | sort -k1,1 -k2,2n -k3,3
timeout 150 python3 -m quickreduce.cli e2e --layers 4 --csv $OUT/e2e.csv --no-plot >> $L 2>&1; echo "e2e: exit $?"; grep -E "decode|prefill" $L | tail -20
