#!/usr/bin/env bash
# 2x H200. (1) fp32up-ext = main (35e3fd2: two slices a step for 16-bit on 2 GPUs) + the same for fp32 (RawLane:
# 32 raw bytes a lane; 64 registers, int6h 8 bytes of spills). Tests, then fp32 A B A B against main2-ext (= main).
# Expectation: fp32 codecs 10-20% faster at 32-512 MB (as bf16 in call bf), 2-8 MB even.
# (2) main2: re-tune this machine (all-reduce + family, bf16), then the family bf16 (main2) and fp32 (fp32up,
# published only if it lands) with that table.
# Carry .wheels/main2-ext .wheels/fp32up-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use fp32up-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,coded_small_segments \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-fp32up.log 2>&1
echo "tests fp32up: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-fp32up.log | tail -7
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized timeout 60 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider >> $OUT/tests-fp32up.log 2>&1
echo "tests fp32up dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-fp32up.log | tail -2
for v in main2 fp32up main2 fp32up; do
  use $v-ext > /dev/null
  DEV_DTYPE=fp32 DEV_SIZES=2,8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 \
    timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange fp32 $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/dev-exchange.log
done
python3 - $OUT/dev-exchange.log <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    f = line.split()
    if f[1] == "kind": head = f[2:]; continue
    for col, x in zip(head, f[3:]): t[(f[1], int(f[2]), col)][f[0]].append(float(x))
for key, runs in sorted(t.items()):
    if key[2] == "nccl": continue
    print(f"fp32 {key[0]:4s} {key[1]:>10d} {key[2]:9s} main2 " + "/".join(f"{x:.2f}" for x in runs["main2"]) + "  fp32up "
          + "/".join(f"{x:.2f}" for x in runs["fp32up"]) + "   up/main %.3f" % (min(runs["fp32up"]) / min(runs["main2"])))
PY
use main2-ext > /dev/null
timeout 150 python3 -m quickreduce.cli tune --no-multicast --gpus $gpus --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
  --sizes 8K:1G:2 --timeout 145 --out $OUT/tuned-w2.json --csv $OUT/tune-w2.csv --no-cache >> $L 2>&1
echo "tune: exit $? [$SECONDS s]"
[ -f $OUT/tuned-w2.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w2.json
for dt in bf16 fp32; do
  left=$((575 - SECONDS)); [ $left -lt 40 ] && break
  [ $dt = fp32 ] && use fp32up-ext > /dev/null
  timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all \
    --dtype $dt --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-$dt.csv > /tmp/family-$dt.log 2>&1
  echo "family $dt: exit $? [$SECONDS s]"; cat /tmp/family-$dt.log >> $L
done
