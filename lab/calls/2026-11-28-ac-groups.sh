#!/usr/bin/env bash
# 4 GPUs (asks nvidia-h100-x4, 2026-11-28), after the one-fence announce (main 47d22aa, wheel fence-ext):
# (1) W = 8 on one shared GPU: the twin and reference scenarios (the announce loops run W - 1 = 7 stores now);
# (2) pipeline groups: the group rule (two_shot_auto_groups: a group per 16 KB passthrough / 24 KB codec pushed to a
#     peer, one below three groups' worth) was measured when every announce cost W - 1 fence round trips. Two-shot:
#     explicit groups through dev_timing; exchange: wheels xg2 / xg4 (the rule fed 2x / 4x the bytes: 2-4x the groups).
#     Expectation: codecs from 64 MB and the exact family at 32-128 MB 2-5% faster with more groups, or no change.
# Carry .wheels/fence-ext .wheels/xg2-ext .wheels/xg4-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use fence-ext > /dev/null
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=passthrough_reference,codecs_vs_twin \
  timeout 170 python3 -m pytest -q -s tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-w8-dist.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_COLLECTIVE_REPLAYS=50 \
  QR_TEST_SCENARIOS=collectives_vs_twin,uneven_all_to_all,collective_graph_replays \
  timeout 170 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w8-coll.log 2>&1 &
wait
echo "W=8 shared tests [$SECONDS s]"; grep -hE "checks|passed|failed|FAIL|rror" $OUT/tests-w8-*.log | tail -12
DEV_SIZES=16,64,256,1024 DEV_METHODS=two,two_g2,two_g4,two_g8,lossless,lossless_g2,lossless_g4,lossless_g8,int4,int4_g2,int4_g4,int4_g8,int4_g16,fp8,fp8_g2,fp8_g4,fp8_g8,fp8_g16 \
  timeout 150 python3 lab/scripts/dev_timing.py > $OUT/dev-groups.log 2>&1
echo "dev_timing groups: exit $? [$SECONDS s]"; cat $OUT/dev-groups.log | grep -E "^ *(bytes|[0-9])"
for v in fence xg2 xg4 fence xg2 xg4; do
  use $v-ext > /dev/null
  timeout 60 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_passthrough,qr_fp8,qr_int4 --sizes 32M:512M:4 --replays 9 --timeout 55 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv fence xg2 xg4
