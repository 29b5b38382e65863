#!/usr/bin/env bash
# 4 GPUs. A/B of the exchange's per-segment CTA shares (wheel skew) against main: the skewed exact
# all-to-all probe (lab/probes/a2a_skew.py) and the exact family (even segments: must not move), then on
# skew: the collective and dynamic all-to-all GPU tests at W = 4 and the MoE layer at 4096 tokens.
# Carry .wheels/main-ext, .wheels/skew-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
for v in main skew; do
  use $v-ext > /dev/null
  timeout 100 python3 lab/probes/a2a_skew.py 512,2048,8192,32768 > $OUT/a2a-skew-$v.txt 2>&1
  echo "a2a skew $v: exit $? [$SECONDS s]"; grep -v Warning $OUT/a2a-skew-$v.txt | tail -17
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_int4 --sizes 8K:1G:4 --replays 9 --timeout 55 --csv /tmp/fam-$v.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam-$v.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv main skew
QR_TEST_WORLD_SIZE=4 QR_COLLECTIVE_REPLAYS=200 QR_DYNAMIC_REPLAYS=300 timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "collective + dynamic tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -16
left=$((560 - SECONDS))
[ $left -gt 40 ] && timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus 4 --part layer --tokens 4096 --iters 10 \
  --timeout $((left - 5)) --csv $OUT/moe-4096.csv > /tmp/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; cat /tmp/moe.log >> $L; tail -32 /tmp/moe.log
