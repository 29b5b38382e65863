#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: A/B of the W = 4 candidates (head = main's kernels; w4a = lab/wip/two-shot-w4-defaults.patch,
# groups counted per peer for every codec; w4b = w4a + the
# one-shot's batched polls), then the best one is tuned, benched with every peer (nccl_symm included)
# and run through `e2e` on the llama3-70b preset at TP = 4 (the family and tests/gpu at 4 ranks: 2026-11-27-w4-family-tests.sh, the next call). Python from the committed snapshot in .snap (run from there).
set -uo pipefail  # $OUT brings back 8 files: logs go into $L
cd .snap && ln -sfn ../.wheels .wheels && ln -sfn ../.peers .peers
DEVICE_LOG=w4.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $L
nvidia-smi topo -m | head -6 >> $L
peers
for v in head w4b; do
  use $v
  timeout 75 python3 -m quickreduce.cli bench --gpus 4 --timeout 70 --replays 9 \
    --methods qr_one_shot,qr_two_shot,qr_lossless,qr_int4,qr_fp8 \
    --sizes 8K,32K,128K,512K,1M,2M,4M,8M,16M,32M,64M,256M --dtype bf16 --csv /tmp/ab.csv >> $L 2>&1
  echo "A/B $v: exit $? [$SECONDS s]" | tee -a $L
  [ -f $OUT/ab-w4.csv ] || sed -n 1p /tmp/ab.csv | sed 's/^/variant,/' > $OUT/ab-w4.csv
  sed 1d /tmp/ab.csv | sed "s/^/$v,/" >> $OUT/ab-w4.csv
done
ab_rows $OUT/ab-w4.csv variant >> $L
# The variant with the lowest geometric-mean time over every (method, size) against head.
best=$(python3 - $OUT/ab-w4.csv <<'PY'
import csv, sys, math, collections
t = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    t[(r["variant"], r["method"], r["size_bytes"])].append(float(r["time_us"]))
score = collections.defaultdict(float)
for (v, m, s), xs in t.items():
    h = t.get(("head", m, s))
    if h and v != "head":
        score[v] += math.log(min(xs) / min(h))
print(min(score, key=score.get) if score and min(score.values()) < 0 else "head")
PY
)
echo "chosen: $best [$SECONDS s]" | tee -a $L
echo $best > chosen  # read by the next call (2026-11-27-w4-family-tests.sh) on the same machine
use $best
timeout 100 python3 -m quickreduce.cli tune --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 95 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]" | tee -a $L
[ -f $OUT/tuned-w4.json ] && cp $OUT/tuned-w4.json tuned-w4.json && export QUICKREDUCE_TUNE_FILE=$PWD/tuned-w4.json
timeout 130 python3 -m quickreduce.cli bench --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 125 --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
echo "bench: exit $? [$SECONDS s]" | tee -a $L
cat /tmp/bench.log >> $L; tail -45 /tmp/bench.log
timeout 190 python3 -m quickreduce.cli e2e --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
  --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4,qr_int4 \
  --timeout 180 --csv $OUT/e2e-llama3-70b-tp4.csv --no-plot > /tmp/e2e.log 2>&1
echo "e2e: exit $? [$SECONDS s]" | tee -a $L; cat /tmp/e2e.log >> $L; tail -40 /tmp/e2e.log
