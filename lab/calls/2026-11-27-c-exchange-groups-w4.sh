#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: (1) A/B of the segment exchange's pipeline groups counted per peer (s22b) against main
# (s22a: groups counted over all W-1 peers): the exact bf16 family at 32 and 128 MB, alternated A B A B, and
# the dynamic all-to-all against the host-sized one at the same sizes; the peers once. (2) e2e llama3-70b
# TP = 4 with the built-in h100-w4 table (rs_ag in it), every provider. (3) The dynamic all-to-all tests at
# W = 8 on one shared GPU, 50 graph replays. Carry .wheels/s22a-ext, .wheels/s22b-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
peers
export QB_TIMEOUT_S=90
t0=$SECONDS
for v in s22a-ext s22b-ext s22a-ext s22b-ext; do
  use $v
  qb --collective reduce_scatter,all_gather,all_to_all --methods qr_passthrough --sizes 32M,128M --csv $OUT/fam.$v.$SECONDS.csv
done
for v in s22a-ext s22b-ext; do
  use $v
  timeout 90 python3 -m quickreduce.cli bench moe --no-multicast --part a2a --a2a-sizes 32M,128M --csv /tmp/a2a.csv >> $L 2>&1
  echo "moe a2a $v: exit $?"; sed 1d /tmp/a2a.csv | sed "s/^/$v,/" >> $OUT/a2a-ab.csv
done
echo "A/B took $((SECONDS - t0)) s"
use s22a-ext
qb --collective reduce_scatter,all_gather,all_to_all --methods nccl,nccl_symm,symm_mem --sizes 32M,128M --csv $OUT/fam-peers.csv
python3 - $OUT <<'PY'
import collections, csv, glob, os, sys
t = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "fam*.csv"))):
    name = os.path.basename(path)
    v = name.split(".")[1] if name.startswith("fam.") else None
    for r in csv.DictReader(open(path)):
        if r["time_us"]:
            t[(r["collective"], int(r["size_bytes"]) >> 20, v or r["method"])].append(float(r["time_us"]))
for k in sorted(t):
    print(*k, " ".join(f"{x:.1f}" for x in t[k]))
PY
cut -d, -f1,9,19-23 $OUT/a2a-ab.csv
t0=$SECONDS
timeout 200 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
  --timeout 195 --csv $OUT/e2e-llama3-70b-tp4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$((SECONDS - t0)) s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
t0=$SECONDS
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=50 timeout 180 python3 -m pytest -q -s \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/dynamic-w8-shared.log 2>&1
echo "dynamic W=8 shared: exit $?, $((SECONDS - t0)) s"; grep -E "checks|passed|failed" $OUT/dynamic-w8-shared.log | tail -12
(cd $OUT && for f in *.log; do echo "===== $f"; cat "$f"; done > /tmp/l && rm -f ./*.log && mv /tmp/l all-logs.log)
(cd $OUT && mkdir -p /tmp/famcsv && python3 -c "
import glob,csv,sys
rows=[]; hdr=None
for p in sorted(glob.glob('fam*.csv')):
    for r in csv.DictReader(open(p)):
        r['file']=p; rows.append(r)
w=csv.DictWriter(open('fam-all.csv','w'),fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
" && rm -f fam.*.csv fam-peers.csv)
ls $OUT
