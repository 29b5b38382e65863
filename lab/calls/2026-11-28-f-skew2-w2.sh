#!/usr/bin/env bash
# 2 or 4 GPUs, wheel skew2 (per-segment CTA shares, steps = the most groups of any share) against main: the
# exact and int4 family at 2-32 MB alternated (A B A B, 21 replays: did the shares cost the even
# collectives anything?), the skew probe; then on skew2 the dynamic all-to-all tests at W = 8 on one
# shared GPU and the whole MoE bench (layer 1-16384 tokens, the dynamic-vs-host call) for publishing.
# Carry .wheels/main-ext, .wheels/skew2-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
for v in main skew2 main skew2; do
  use $v-ext > /dev/null
  timeout 50 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_int4 --sizes 2M,8M,32M,128M --replays 21 --timeout 45 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv main skew2
use skew2-ext > /dev/null
timeout 60 python3 lab/probes/a2a_skew.py 2048,8192 > $OUT/a2a-skew-skew2.txt 2>&1
echo "a2a skew skew2: exit $? [$SECONDS s]"; grep -v Warning $OUT/a2a-skew-skew2.txt | tail -9
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_DYNAMIC_REPLAYS=50 QR_COLLECTIVE_REPLAYS=50 \
  QR_TEST_SCENARIOS=uneven_all_to_all,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  timeout 120 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8.log 2>&1
echo "dynamic + uneven tests W=8 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w8.log | tail -8
left=$((570 - SECONDS))
timeout $left python3 -m quickreduce.cli bench moe --no-multicast --gpus $gpus --tokens 1,32,256,4096,16384 --iters 10 --timeout $((left - 5)) \
  --csv $OUT/moe.csv > /tmp/moe.log 2>&1
echo "moe: exit $? [$SECONDS s]"; cat /tmp/moe.log >> $L; grep -E "T=  4096|T= 16384|a2a|ratio" /tmp/moe.log | tail -40
